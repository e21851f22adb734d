module ppl.dev/qemutest

go 1.26.8
