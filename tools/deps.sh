#!/usr/bin/env bash
# Installs, from Debian's packages, what building and testing ckpt needs and
# is not there yet. Sourced by demo.sh and test.sh; runs as root.
ckpt_install_deps() {
	local want=(build-essential cmake pkg-config liburing-dev liblmdb-dev libzstd-dev
	            libxxhash-dev libzmq3-dev libsodium-dev libmicrohttpd-dev prometheus python3 "$@")
	want+=(libjansson-dev python3-matplotlib) # ckpt-sim: reads ckpt-bench's JSON; --plot
	want+=(libcurl4-openssl-dev) # ckptd's preemption-notice pollers (ckptd/notice)
	want+=(libfabric-dev libfabric-bin) # the peer-DRAM tier's transport (storage/fabric.c; fi_info in tests)
	want+=(libisal-dev) # the peer tier's rs:K+M scheme: Reed–Solomon by ISA-L (storage/ec.c)
	want+=(libssl-dev libexpat1-dev) # the S3 client (storage/s3*.c): SigV4's SHA-256/HMAC and MD5, XML answers
	want+=(python3-dev python3-venv) # the Python binding (libckpt/python) and its test environment
	local missing=()
	for p in "${want[@]}"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "installing: ${missing[*]}"
	if [ "$(id -u)" != 0 ]; then
		echo "not root: install these packages first: ${missing[*]}" >&2
		return 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# What the S3 tests need (tests/s3/s3gw.sh): Debian's Ceph, as one monitor,
# one OSD and the RADOS gateway on loopback (about 230 MB installed).
# tools/test.sh installs them with the rest: ckpt_install_deps "${CKPT_S3_PKGS[@]}".
CKPT_S3_PKGS=(ceph-mon ceph-osd radosgw)

# The Python virtual environment of the binding's tests, examples and
# benchmarks: torch (PyPI's default wheel, which runs on CPU), numpy, pytest,
# safetensors, and the build backend, at the versions of
# tools/python-requirements.txt. Created once at ${CKPT_VENV:-.venv} (ignored
# by git); a later call returns at once unless the requirements changed.
# Prints nothing when there is nothing to do. Sets CKPT_PY to its python.
ckpt_python_env() {
	local repo venv req stamp want
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	venv=${CKPT_VENV:-$repo/.venv}
	req=$repo/tools/python-requirements.txt
	stamp=$venv/.ckpt-requirements
	want=$(sha256sum "$req" | cut -d' ' -f1)
	CKPT_PY=$venv/bin/python
	if [ -x "$CKPT_PY" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		return 0
	fi
	echo "python env: installing $req into $venv (torch is large: minutes the first time)"
	# Debian's interpreter, whatever else is first on PATH: its python3-dev
	# headers are the ones the extension is built against.
	[ -x "$CKPT_PY" ] || /usr/bin/python3 -m venv "$venv" || return 1
	"$CKPT_PY" -m pip install -q --disable-pip-version-check -r "$req" || return 1
	echo "$want" >"$stamp"
}
