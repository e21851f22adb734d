module ppl.dev/gguf

go 1.26.8
