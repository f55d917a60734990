#!/bin/bash
# How tests/golden/v1 was made. Kept for the record: DO NOT RUN IT to
# "refresh" the golden files. They are the format as version 1 wrote it, and
# every later version must read them unchanged (see README.md). A new format
# version gets a new directory (v2/) made by that version's tool.
#
# usage: tests/golden/make-golden.sh BUILD_DIR OUT_DIR
# writes OUT_DIR/jobs/golden/... and OUT_DIR/SHA256SUMS
set -euo pipefail

build=$(cd "${1:?usage: make-golden.sh BUILD_DIR OUT_DIR}" && pwd)
out=${2:?usage: make-golden.sh BUILD_DIR OUT_DIR}
ckpt="$build/bin/ckpt"
gen="$build/tests/golden_gen"
[ -x "$ckpt" ] && [ -x "$gen" ] || { echo "build ckpt and golden_gen first" >&2; exit 1; }
[ ! -e "$out/jobs" ] || { echo "$out/jobs exists: golden files are never regenerated" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gen" "$work/in"
root="$work/root"
save() { "$ckpt" save --root "$root" --job golden --chunk-bytes 64K "$@"; }

in="$work/in"
save --version 1 "$in/v1/r0/plain.bin" "$in/v1/r0/empty.bin" "$in/v1/r0/odd.bin"
save --version 2 --compress "$in/v2/r0/log.txt" "$in/v2/r0/noise.bin"
save --version 3 --rank 0 --world-size 2 "$in/v3/r0/part.bin"
save --version 3 --rank 1 --world-size 2 "$in/v3/r1/part.bin" "$in/v3/r1/rng.state"

mkdir -p "$out"
cp -R "$root/jobs" "$out/jobs"
chmod -R a+rX,go-w "$out/jobs"
(
	cd "$out"
	find jobs -type f | LC_ALL=C sort | xargs sha256sum
	cd "$in"
	find . -type f | LC_ALL=C sort | sed 's|^\./|inputs/|' | while read -r f; do
		printf '%s  %s\n' "$(sha256sum < "${f#inputs/}" | cut -d' ' -f1)" "$f"
	done
) > "$out/SHA256SUMS"
cat "$out/SHA256SUMS"
