module ppl.dev/quant

go 1.26.8

require golang.org/x/sys v0.50.0 // indirect
