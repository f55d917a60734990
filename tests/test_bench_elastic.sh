#!/bin/bash
# A smoke run of tools/bench-elastic.sh (64 MiB, one round): the elastic
# restore and export benchmark still runs and reports every row. Untimed:
# the figures come from full-size runs (docs/benchmarks.md).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${CKPT_BIN:-$here/../build/bin}
command -v fio >/dev/null || { echo "SKIP: no fio"; exit 77; }
out=$(CKPT_BIN=$bin bash "$here/../tools/bench-elastic.sh" --size 64M --rounds 1 --dir "$(dirname "$bin")" 2>&1) ||
	{ echo "$out"; echo "FAIL: bench-elastic.sh failed"; exit 1; }
for row in "fio read" "restore 4 saved ranks -> 3 ranks" "fio write" "ckpt export" "fio copy"; do
	grep -q "| $row" <<<"$out" || { echo "$out"; echo "FAIL: no '$row' row"; exit 1; }
done
echo "bench_elastic: ok"
