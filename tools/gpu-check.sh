#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build the CUDA parts, run the GPU tests,
# run the reference trainer in CUDA mode with kill -9 and resume, run the GPU
# benchmark, and print a short table. Budget: under 8 minutes.
#   tools/gpu-check.sh [--size BYTES]     (default 4G of CUDA regions)
set -uo pipefail
cd "$(dirname "$0")/.."
size=4G
[ "${1:-}" = --size ] && size=$2
t_start=$SECONDS
. tools/deps.sh
ckpt_install_deps >/dev/null || true
export TMPDIR=${TMPDIR:-/tmp}
rows=()
row() { rows+=("$(printf '| %-34s | %-8s | %s |' "$1" "$2" "$3")"); }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "no NVIDIA GPU here"; exit 77
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
echo "GPU: $gpu (sm_$cc)"

echo "== build (CUDA on, sm_$cc)"
if cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCKPT_WITH_CUDA=ON -DCKPT_CUDA_ARCHITECTURES="$cc" \
	>build-gpu.log 2>&1 && cmake --build build-gpu -j"$(nproc)" >>build-gpu.log 2>&1; then
	row build ok "$((SECONDS - t_start)) s"
else
	tail -30 build-gpu.log; row build FAIL "see build-gpu.log"
	printf '%s\n' "${rows[@]}"; exit 1
fi

run_test() { # ctest regex, label
	local out rc
	out=$(cd build-gpu && timeout 300 ctest -R "$1" --output-on-failure 2>&1); rc=$?
	echo "$out" | tail -15
	if echo "$out" | grep "100% tests passed" >/dev/null; then
		if echo "$out" | grep "Skipped" >/dev/null; then row "$2" SKIP "$(echo "$out" | grep -m1 Skipped)"
		else row "$2" ok ""; fi
	else
		row "$2" FAIL "exit $rc"
	fi
}
echo "== GPU tests"
run_test '^test_gpu_kernels$' "kernels vs C reference"
run_test '^test_gpu_regions$' "CUDA regions, lazy, fence, e2e sums"
run_test '^trainer_resume_cuda$' "trainer CUDA kill -9 + resume"
echo "== Python: CUDA tensors (libckpt/python/tests/test_cuda.py)"
# The package built twice: without CUDA (tensors through pinned host copies),
# then with (tensors as CUDA regions, lazy saves, fence), which stays installed.
py=${CKPT_PY:-.venv/bin/python}
if [ -x "$py" ] && "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	for cuda in OFF ON; do
		if ! "$py" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
			--config-settings=cmake.define.CKPT_WITH_CUDA=$cuda --config-settings=cmake.define.CKPT_CUDA_ARCHITECTURES="$cc" . >build-gpu/pip-gpu.log 2>&1; then
			tail -20 build-gpu/pip-gpu.log; row "python CUDA tensors (CUDA $cuda)" FAIL "pip install: see build-gpu/pip-gpu.log"; continue
		fi
		out=$(cd libckpt/python/tests && timeout 300 "$py" -m pytest -q -p no:cacheprovider -rs test_cuda.py 2>&1)
		rc=$?
		echo "$out" | tail -15
		res=$(echo "$out" | grep -E '[0-9]+ (passed|failed|skipped)' | tail -1)
		if [ $rc -eq 0 ]; then row "python CUDA tensors (CUDA $cuda)" ok "$res"
		else row "python CUDA tensors (CUDA $cuda)" FAIL "$res"; fi
	done
else
	row "python CUDA tensors" SKIP "no python with a CUDA torch at ${py} (tools/deps.sh)"
fi
echo "== CPU suite on this machine (quick)"
run_test '^(test_roundtrip|test_corrupt|test_kernels|test_xxh3_port|test_cuda_emu)$' "CPU tests incl. XXH3 port"

echo "== GPU benchmark"
root=$(mktemp -d "$TMPDIR/ckpt-gpu-bench-XXXXXX")
bench=$(timeout 240 build-gpu/bin/ckpt-gpu-bench --root "$root" --size "$size" --regions 16 --iters 3 --json)
rm -rf "$root"
echo "$bench"
if [ -n "$bench" ]; then
	read -r ref eager lazy fence restore < <(echo "$bench" | python3 -c '
import json,sys; b=json.load(sys.stdin)
print(b["memcpy_d2h_s"], b["eager_stall_s"], b["lazy_stall_s"], b["fence_s"], b["restore_s"])')
	row "D2H: plain cudaMemcpy to pinned" "$ref s" "$size, the limit"
	row "eager save stall" "$eager s" "$(python3 -c "print(f'{$ref/$eager*100:.0f}% of the limit')")"
	row "lazy save stall" "$lazy s" "fence after it: $fence s"
	row "restore into device" "$restore s" ""
else
	row "GPU benchmark" FAIL ""
fi
kb=$(cd build-gpu && CKPT_GPU_BENCH=1 ./tests/test_gpu_kernels 2>/dev/null | grep '^BENCH' || true)
while read -r line; do
	[ -n "$line" ] || continue
	k=$(echo "$line" | sed -n 's/.*kernel=\([^ ]*\).*/\1/p')
	g=$(echo "$line" | sed -n 's/.*gbps=\([^ ]*\).*/\1/p' | head -1)
	r=$(echo "$line" | sed -n 's/.*ratio=\([^ ]*\).*/\1/p')
	row "kernel $k" "$g GB/s" "x$r of D2D memcpy"
done <<<"$kb"

echo
echo "| check                              | result   | note |"
echo "|------------------------------------|----------|------|"
printf '%s\n' "${rows[@]}"
echo "total $((SECONDS - t_start)) s"
printf '%s\n' "${rows[@]}" | grep FAIL >/dev/null && exit 1
exit 0
