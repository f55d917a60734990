#!/usr/bin/env bash
# The install tree works for a user: headers, libraries, ckpt.pc and the
# CMake package land under the chosen prefix, and a program built with
# pkg-config alone, or with CMake's find_package(ckpt) alone (against the
# shared and the static library), links, runs and checkpoints.
set -euo pipefail
BIN=${CKPT_BIN:?}
build=$(cd "$BIN/.." && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
command -v pkg-config >/dev/null || { echo "no pkg-config"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in include/ckpt.h lib/libckpt.so lib/libckpt.a lib/pkgconfig/ckpt.pc bin/ckpt \
	lib/cmake/ckpt/ckptConfig.cmake lib/cmake/ckpt/ckptConfigVersion.cmake lib/cmake/ckpt/ckptTargets.cmake; do
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

# find_package(ckpt) from a project of its own: a version this install
# satisfies, both targets, nothing but the prefix to find them by.
mkdir -p "$tmp/consumer"
cp "$src/tools/example/ckpt-example.c" "$tmp/consumer/"
cat > "$tmp/consumer/CMakeLists.txt" <<'CML'
cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES C)
find_package(ckpt 0.1 REQUIRED CONFIG)
add_executable(example_shared ckpt-example.c)
target_link_libraries(example_shared PRIVATE ckpt::ckpt)
add_executable(example_static ckpt-example.c)
target_link_libraries(example_static PRIVATE ckpt::ckpt_static)
CML
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${san[*]:-}" \
	-DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/consumer.log" 2>&1 \
	|| { cat "$tmp/consumer.log"; echo "FAIL: find_package(ckpt) against the install tree"; exit 1; }
cmake --build "$tmp/consumer/build" >>"$tmp/consumer.log" 2>&1 \
	|| { cat "$tmp/consumer.log"; echo "FAIL: the find_package consumer does not build"; exit 1; }
for kind in shared static; do
	out=$("$tmp/consumer/build/example_$kind" --root "$tmp/root-$kind" --job inst --rank 0 --world-size 1 \
		--steps 6 --ckpt-every 3)
	echo "$out" | grep '^final-digest ' >/dev/null || { echo "FAIL: find_package $kind: $out"; exit 1; }
done
needed=$(ldd "$tmp/consumer/build/example_shared") # whole, as above: no SIGPIPE under pipefail
grep -q "$tmp/prefix/lib/libckpt.so" <<<"$needed" \
	|| { echo "FAIL: the shared consumer does not use the installed libckpt.so"; exit 1; }
# A version the install does not satisfy is refused.
sed -i 's/find_package(ckpt 0.1 /find_package(ckpt 9.0 /' "$tmp/consumer/CMakeLists.txt"
if cmake -S "$tmp/consumer" -B "$tmp/consumer/build9" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null 2>&1; then
	echo "FAIL: find_package(ckpt 9.0) accepted version 0.1"; exit 1
fi
echo "install: ok (pkg-config, find_package shared and static)"
