module ppl.dev/kernels

go 1.26.8
