#!/bin/bash
# Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/:
#   shard/  small valid shard files made by `ckpt save`, plus a bare footer
#           and a bare tail cut out of one (seeds for the decoders alone)
#   index/  index records and keys as the LMDB index stores them
# usage: tests/fuzz/make-corpus.sh BUILD_DIR
# The seeds are committed; rerun only to add coverage, and keep the whole
# corpus under 200 KiB.
set -euo pipefail

build=${1:?usage: make-corpus.sh BUILD_DIR}
ckpt="$(cd "$build" && pwd)/bin/ckpt"
[ -x "$ckpt" ] || { echo "no ckpt binary in $build/bin" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
out="$here/corpus"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$out/shard" "$out/index"
rm -f "$out"/shard/* "$out"/index/*
cd "$work"
mkdir in
printf 'hello, checkpoint\n' > in/hello.txt
: > in/empty
head -c 3000 /dev/urandom > in/rng.state
for i in $(seq 1 4000); do echo "step $i loss 0.$((i * 7919 % 10000)) lr 3e-4"; done > in/train.log
head -c 140000 in/train.log > in/log140k
printf '{"vocab": 32000, "dim": 512}\n' > in/config.json

save() { "$ckpt" save --root r --job seed --chunk-bytes 64K "$@" > /dev/null; }
save --version 1 in/hello.txt
save --version 2 in/hello.txt in/empty
save --version 3 --compress in/train.log
save --version 4 --compress in/log140k
save --version 5 in/config.json in/empty in/rng.state
save --version 6 --rank 0 --world-size 2 in/hello.txt
save --version 6 --rank 1 --world-size 2 in/rng.state

chmod 644 r/jobs/seed/v*/r*.ckpt
n=0
for f in r/jobs/seed/v*/r*.ckpt; do
	n=$((n + 1))
	cp "$f" "$out/shard/$(printf 'seed-%02d' $n)-$(basename "$(dirname "$f")")-$(basename "$f")"
done

# A bare footer and a bare tail, cut out of the compressed multi-chunk shard.
f=r/jobs/seed/v00000000000000000004/r000000.ckpt
size=$(stat -c %s "$f")
le64() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
fo=$(le64 "$f" $((size - 64 + 16)))
fl=$(le64 "$f" $((size - 64 + 24)))
dd if="$f" of="$out/shard/footer-only" bs=1 skip="$fo" count="$fl" status=none
tail -c 64 "$f" > "$out/shard/tail-only"

# Index records (little-endian fields) and keys (big-endian numbers).
le() { # value bytes
	local v=$1 i
	for ((i = 0; i < $2; i++)); do printf "\\x$(printf %02x $(((v >> (8 * i)) & 255)))"; done
}
be() {
	local v=$1 i
	for ((i = $2 - 1; i >= 0; i--)); do printf "\\x$(printf %02x $(((v >> (8 * i)) & 255)))"; done
}
# Records as written today end with the lineage; older ones lack it.
version_rec() { le 1 4; le "$1" 4; le "$2" 4; le "$3" 4; le 1048576 8; le 524288 8; le 1700000000000000000 8; le "$4" 8; }
shard_rec() { le 1 4; le "$1" 4; le 1048576 8; le 524288 8; le 81985529216486895 8; le 1700000000000000000 8; }
lineage() { le 4294967298 8; }
{ version_rec 1 2 1 0; lineage; } > "$out/index/version-pending"
{ version_rec 2 2 2 1700000001000000000; lineage; } > "$out/index/version-committed"
{ version_rec 3 4 4 1700000001000000000; lineage; } > "$out/index/version-deleting"
version_rec 2 2 2 1700000001000000000 > "$out/index/version-committed-no-lineage"
{ le 2 4; le 2 4; le 1 4; le 1 4; } > "$out/index/version-newer-schema"
{ shard_rec 4; lineage; } > "$out/index/shard-disk"
{ shard_rec 15; lineage; } > "$out/index/shard-all-tiers"
shard_rec 4 > "$out/index/shard-disk-no-lineage"
{ printf '\x06golden'; be 42 8; } > "$out/index/key-version"
{ printf '\x06golden'; be 42 8; be 3 4; } > "$out/index/key-shard"
{ printf '\x40'; head -c 64 /dev/zero | tr '\0' 'j'; be 18446744073709551615 8; be 4294967295 4; } \
	> "$out/index/key-longest"
# The SHARED tier's marker, and the object store's keys (format/s3tree.h, prefix "p/").
printf 'ckpt-shared-commit 1\njob j\nversion 7\nworld_size 8\nlineage 00000000deadbeef\n' > "$out/index/shared-marker"
printf 'p/jobs/j/v00000000000000000007/r000003.ckpt' > "$out/index/s3-key-shard"
printf 'p/jobs/job-1.x/v18446744073709551615/COMMITTED' > "$out/index/s3-key-marker"

du -sh "$out"
