module ppl.dev/quant

go 1.26.8
