#!/usr/bin/env bash
# Decode throughput of package quant's kernels at every level this CPU runs,
# against the plain Go reference measured in the same run: for each type of
# quant's benchmarks (bench_test.go; one 4096-weight row), weights per ns of
# DequantizeRow (float32 out) and DecodeInt8 (the integer form of
# --activations int8) per level, and each level's ratio to generic. Weights
# per ns of the thread's CPU time where the benchmarks report it (Linux),
# else of wall time; the best of COUNT runs counts (the machine may be
# shared: the best is the least disturbed). Prints a Markdown table.
# Usage: bench/quant-kernels.sh [COUNT] [BENCHTIME] [TYPE-REGEXP]
set -euo pipefail
cd "$(dirname "$0")/../quant"
count=${1:-5}
benchtime=${2:-200ms}
types=${3:-.*}
go test -run '^$' -bench "^Benchmark(Dequantize|DecodeInt8)\$/^(${types})\$/" \
  -benchtime "$benchtime" -count "$count" . | awk -v metric=cpu-weights/ns '
  /^Benchmark/ {
    split($1, p, "/"); op = p[1]; sub(/^Benchmark/, "", op)
    typ = p[2]; lvl = p[3]; sub(/-[0-9]+$/, "", lvl)
    v = 0
    for (i = 2; i < NF; i++) if ($(i+1) == metric) v = $i
    if (v == 0) { for (i = 2; i < NF; i++) if ($(i+1) == "weights/ns") v = $i; metric = "weights/ns" }
    k = op SUBSEP typ
    if (!(k in seen)) { seen[k] = 1; rows[++n] = k }
    if (v > best[k, lvl]) best[k, lvl] = v
    if (!(lvl in haslvl)) { haslvl[lvl] = 1; lvls[++nl] = lvl }
  }
  END {
    head = "| op | type |"; rule = "| --- | --- |"
    for (j = 1; j <= nl; j++) { head = head " " lvls[j] " " metric " |"; rule = rule " --- |" }
    for (j = 2; j <= nl; j++) { head = head " " lvls[j] " / generic |"; rule = rule " --- |" }
    print head; print rule
    for (r = 1; r <= n; r++) {
      split(rows[r], kk, SUBSEP); line = "| " kk[1] " | " kk[2] " |"
      for (j = 1; j <= nl; j++) line = line sprintf(" %.3g |", best[rows[r], lvls[j]])
      for (j = 2; j <= nl; j++) {
        g = best[rows[r], "generic"]
        line = line (g > 0 ? sprintf(" %.1f |", best[rows[r], lvls[j]] / g) : " |")
      }
      print line
    }
  }'
