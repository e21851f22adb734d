module ppl.dev/oracle

go 1.26.8
