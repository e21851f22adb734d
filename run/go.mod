module ppl.dev/run

go 1.26.8

require github.com/alecthomas/kong v1.17.0
