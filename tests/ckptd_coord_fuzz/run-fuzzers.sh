#!/bin/bash
# Builds fuzz_coord (the coordinator index codecs of ckptd/coord/codec.c:
# record and key decoders) with clang and libFuzzer, and runs it for SECONDS
# seconds from the committed seed corpus (corpus/).
#
# usage: tests/ckptd_coord_fuzz/run-fuzzers.sh SECONDS
# env: CKPT_FUZZ_BUILD  build directory (default: <repo>/build-fuzz, shared
#                       with tests/fuzz/run-fuzzers.sh)
#      CC               a clang to use (default: clang-14, then clang)
#      CKPT_COORD_FUZZ_STRICT=1  fail on the known decoder bugs (README.md)
# exit: 0 no crash; 1 the target crashed, hung, leaked or broke an invariant
#       (the input is kept under <build>/fuzz-artifacts/coord), or the build
#       failed; 2 usage; 77 no clang with libFuzzer here.
set -u

secs=${1:-}
[[ "$secs" =~ ^[0-9]+$ ]] && [ "$secs" -gt 0 ] || {
	echo "usage: run-fuzzers.sh SECONDS" >&2
	exit 2
}

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${CKPT_FUZZ_BUILD:-$repo/build-fuzz}
t=fuzz_coord
name=coord

# A clang whose libFuzzer runtime is installed, or skip.
cc=""
for c in ${CC:-} clang-14 clang; do
	command -v "$c" > /dev/null 2>&1 || continue
	"$c" --version 2>/dev/null | grep -q clang || continue
	probe=$(mktemp -d)
	printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
		> "$probe/p.c"
	if "$c" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" > /dev/null 2>&1; then
		cc=$(command -v "$c")
	fi
	rm -rf "$probe"
	[ -z "$cc" ] || break
done
if [ -z "$cc" ]; then
	echo "SKIP: no clang with libFuzzer (install clang-14 and libclang-rt-14-dev)"
	exit 77
fi

# Configure once; reconfigure only if the directory was made otherwise.
if ! grep -q '^CKPT_BUILD_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	echo "== configuring $build with $cc"
	mkdir -p "$build"
	CC="$cc" cmake -S "$repo" -B "$build" -DCKPT_BUILD_FUZZ=ON -DCKPT_WITH_CUDA=OFF \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build/fuzz-configure.log" 2>&1 || {
		cat "$build/fuzz-configure.log"
		echo "FAIL: configuring the fuzz build"
		exit 1
	}
fi
echo "== building $t"
if ! cmake --build "$build" -j"$(nproc)" --target "$t" > "$build/fuzz-$name-build.log" 2>&1; then
	tail -40 "$build/fuzz-$name-build.log"
	echo "FAIL: building $t (is add_subdirectory(ckptd_coord_fuzz) in tests/CMakeLists.txt?)"
	exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
bin="$build/fuzz/$t"
seeds="$here/corpus"
work="$build/fuzz-corpus/$name"   # grows from run to run; seeds stay as committed
art="$build/fuzz-artifacts/$name"
log="$build/fuzz-$name.log"
mkdir -p "$work" "$art"
echo "== $t for ${secs}s"
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
	-max_len=4096 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
	-artifact_prefix="$art/" "$work" "$seeds" > "$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
if [ "$rc" -ne 0 ]; then
	tail -60 "$log"
	echo "FAIL: $t exited $rc after ${execs:-?} runs; input kept in $art:"
	ls -1 "$art"
	exit 1
fi
echo "ok   $t: ${execs:-?} runs, ${cov:-cov: ?}, corpus $(ls -1 "$work" | wc -l) inputs"
exit 0
