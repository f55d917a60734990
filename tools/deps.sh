#!/usr/bin/env bash
# Installs, from Debian's packages, what building and testing ckpt needs and
# is not there yet. Sourced by demo.sh and test.sh; runs as root.
ckpt_install_deps() {
	local want=(build-essential cmake pkg-config liburing-dev liblmdb-dev libzstd-dev
	            libxxhash-dev libzmq3-dev libsodium-dev libmicrohttpd-dev prometheus python3 "$@")
	want+=(libjansson-dev python3-matplotlib) # ckpt-sim: reads ckpt-bench's JSON; --plot
	want+=(libcurl4-openssl-dev) # ckptd's preemption-notice pollers (ckptd/notice)
	want+=(libfabric-dev libfabric-bin) # the peer-DRAM tier's transport (storage/fabric.c; fi_info in tests)
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
