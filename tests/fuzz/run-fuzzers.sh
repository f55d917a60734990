#!/bin/bash
# Builds every libFuzzer target of the project with clang (once, into its
# own build directory) and runs each for SECONDS seconds, starting from its
# committed seed corpus (all in tests/fuzz, corpus/<name>): the shard parser
# and index records, ckptd's wire protocol, the coordinator's stored records,
# ckpt-sim's reader of ckpt-bench reports, the
# ckptd agent's preemption-notice parsers (fuzz_notice), its kernel-file
# parsers for straggler evidence (fuzz_health) and the safetensors header
# parser of ckpt import (fuzz_safetensors), and the S3 client's parsers of
# its servers' XML answers (fuzz_s3_xml) and of credentials (fuzz_s3_config).
#
# usage: tests/fuzz/run-fuzzers.sh SECONDS [TARGET...]
#   SECONDS  fuzzing time per target (the build is not counted)
#   TARGET   fuzz_shard, fuzz_index, fuzz_proto, fuzz_coord, fuzz_bench_json,
#            fuzz_notice, fuzz_health, fuzz_safetensors, fuzz_s3_xml,
#            fuzz_s3_config (default: all)
# env: CKPT_FUZZ_BUILD  build directory (default: <repo>/build-fuzz)
#      CC               a clang to use (default: clang-14, then clang)
# exit: 0 no crash, 1 a target crashed, hung, leaked or broke an invariant
#       (the input is kept under <build>/fuzz-artifacts), or the build
#       failed; 2 usage; 77 no clang with libFuzzer here.
set -u

secs=${1:-}
[[ "$secs" =~ ^[0-9]+$ ]] && [ "$secs" -gt 0 ] || {
	echo "usage: run-fuzzers.sh SECONDS [TARGET...]" >&2
	exit 2
}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_shard fuzz_index fuzz_proto fuzz_coord fuzz_bench_json fuzz_notice fuzz_health fuzz_safetensors fuzz_s3_xml fuzz_s3_config)

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${CKPT_FUZZ_BUILD:-$repo/build-fuzz}

# A clang whose libFuzzer runtime is installed, or skip.
cc=""
for c in ${CC:-} clang-14 clang; do
	command -v "$c" > /dev/null 2>&1 || continue
	"$c" --version 2>/dev/null | grep clang >/dev/null || continue
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

# Configure with the fuzz option (cheap when cached; picks up new targets).
mkdir -p "$build"
if ! grep -q '^CKPT_BUILD_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	echo "== configuring $build with $cc"
fi
CC="$cc" cmake -S "$repo" -B "$build" -DCKPT_BUILD_FUZZ=ON -DCKPT_WITH_CUDA=OFF \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build/fuzz-configure.log" 2>&1 || {
	cat "$build/fuzz-configure.log"
	echo "FAIL: configuring the fuzz build"
	exit 1
}
echo "== building ${targets[*]}"
if ! cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" > "$build/fuzz-build.log" 2>&1; then
	tail -40 "$build/fuzz-build.log"
	echo "FAIL: building the fuzz targets"
	exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
for t in "${targets[@]}"; do
	name=${t#fuzz_}
	bin="$build/fuzz/$t"
	# Where each target keeps its seeds and dictionary, and its input bound.
	seeds="$here/corpus/$name" dictf="$here/$name.dict" maxlen=()
	case $t in
	fuzz_proto) maxlen=(-max_len=65536) ;;
	fuzz_coord) maxlen=(-max_len=4096) ;;
	fuzz_notice) maxlen=(-max_len=4096) ;;
	fuzz_health) maxlen=(-max_len=8192) ;;
	fuzz_safetensors) maxlen=(-max_len=8192) ;;
	fuzz_s3_xml) maxlen=(-max_len=16384) ;;
	fuzz_s3_config) maxlen=(-max_len=4096) ;;
	esac
	work="$build/fuzz-corpus/$name"   # grows from run to run; seeds stay as committed
	art="$build/fuzz-artifacts/$name"
	log="$build/fuzz-$name.log"
	mkdir -p "$work" "$art"
	dict=()
	[ -f "$dictf" ] && dict=(-dict="$dictf")
	echo "== $t for ${secs}s"
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
		"${maxlen[@]}" -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
		-artifact_prefix="$art/" "${dict[@]}" "$work" "$seeds" > "$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	if [ "$rc" -ne 0 ]; then
		failed=1
		tail -60 "$log"
		echo "FAIL: $t exited $rc after ${execs:-?} runs; input kept in $art:"
		ls -1 "$art"
	else
		echo "ok   $t: ${execs:-?} runs, ${cov:-cov: ?}, corpus $(ls -1 "$work" | wc -l) inputs"
	fi
done
exit $failed
