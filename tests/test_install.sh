#!/usr/bin/env bash
# The install tree works for a user: headers, libraries and ckpt.pc land
# under the chosen prefix, and a program built with pkg-config alone links,
# runs and checkpoints.
set -euo pipefail
BIN=${CKPT_BIN:?}
build=$(cd "$BIN/.." && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
command -v pkg-config >/dev/null || { echo "no pkg-config"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in include/ckpt.h lib/libckpt.so lib/libckpt.a lib/pkgconfig/ckpt.pc bin/ckpt; do
	[ -e "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# A sanitized library needs the sanitizer runtime in the program too.
san=()
# (ldd's output is taken whole first: grep -q quitting early would SIGPIPE
# ldd, and pipefail would then read the match as a failure.)
needed=$(ldd "$tmp/prefix/lib/libckpt.so")
if grep -q libasan <<<"$needed"; then
	san=(-fsanitize=address,undefined)
fi
# The compiler that built the library: a sanitizer runtime from another
# compiler (gcc's libasan against clang's static one) refuses to start.
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cc=${cc:-cc}
# shellcheck disable=SC2046
"$cc" "${san[@]}" "$src/tools/example/ckpt-example.c" $(pkg-config --cflags --libs ckpt) \
	-Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/example"
out=$("$tmp/example" --root "$tmp/root" --job inst --rank 0 --world-size 1 --steps 6 --ckpt-every 3)
echo "$out" | grep '^final-digest ' >/dev/null || { echo "FAIL: $out"; exit 1; }
"$tmp/prefix/bin/ckpt" ls --root "$tmp/root" --job inst --json | grep '"state": "COMMITTED"' >/dev/null \
	|| { echo "FAIL: installed ckpt tool does not list the version"; exit 1; }
echo "install: ok"
