#!/usr/bin/env bash
# Every ckpt command's --json output is one valid JSON document with the
# documented fields, and the exit codes are the documented ones.
set -euo pipefail
BIN=${CKPT_BIN:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-cli-json-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
r=$tmp/root
head -c 300000 /dev/urandom >"$tmp/a.bin"
printf 'config\n' >"$tmp/b.txt"
j() { python3 -c 'import json,sys; d=json.load(sys.stdin); exec(sys.argv[1])' "$1"; }
"$BIN/ckpt" save --root "$r" --job j --version 1 --json "$tmp/a.bin" "$tmp/b.txt" \
	| j 'assert d["version"]==1 and d["committed"] is True and d["bytes"]==300007, d'
"$BIN/ckpt" save --root "$r" --job j --version 2 --compress --json "$tmp/a.bin" "$tmp/b.txt" >/dev/null
"$BIN/ckpt" ls --root "$r" --json | j 'assert [v["version"] for v in d]==[1,2] and all(v["state"]=="COMMITTED" for v in d), d'
"$BIN/ckpt" ls --root "$r" --job nosuch --json | j 'assert d==[], d'
"$BIN/ckpt" show --root "$r" --job j --version 2 --json \
	| j 'assert d["state"]=="COMMITTED" and [x["name"] for x in d["shards"][0]["regions"]]==["a.bin","b.txt"], d'
"$BIN/ckpt" verify --root "$r" --job j --json | j 'assert len(d)==2 and all(x["ok"] for x in d), d'
"$BIN/ckpt" restore --root "$r" --job j --out "$tmp/out" --json | j 'assert d["version"]==2, d'
cmp "$tmp/a.bin" "$tmp/out/a.bin"
"$BIN/ckpt" gc --root "$r" --job j --keep 1 --json | j 'assert d["deleted"]==1, d'
"$BIN/ckpt" reindex --root "$r" --json | j 'assert d["shards"]==1 and d["refused"]==0, d'
code() { set +e; "$@" >/dev/null 2>&1; echo $?; set -e; }
[ "$(code "$BIN/ckpt" save --root "$r" --job j --version 2 "$tmp/a.bin")" = 1 ] # already committed
[ "$(code "$BIN/ckpt" ls --bogus)" = 2 ]
[ "$(code "$BIN/ckpt" show --root "$r" --job j --version 99)" = 4 ]
[ "$(code "$BIN/ckpt" ls --root "$tmp/none")" = 4 ]
# Damage inside a.bin's data (padding between chunks carries no data and no checksum).
shard=$(ls "$r"/jobs/j/v*/r000000.ckpt)
python3 - "$shard" "$tmp/a.bin" <<'PY'
import sys
shard, orig = sys.argv[1], sys.argv[2]
d = bytearray(open(shard, "rb").read())
off = bytes(d).index(open(orig, "rb").read()[1000:1064])
d[off] ^= 0xFF
open(shard, "r+b").write(d)
PY
[ "$(code "$BIN/ckpt" verify --root "$r" --job j)" = 3 ]
echo "cli json: ok"
