module ppl.dev/cache

go 1.26.8

require (
	github.com/alecthomas/kong v1.17.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
)
