module ppl.dev/slurm

go 1.26.8

require (
	github.com/alecthomas/kong v1.17.0
	gopkg.in/yaml.v3 v3.0.1
)
