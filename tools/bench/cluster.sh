# shellcheck shell=bash
# shellcheck disable=SC2154 # bin, work, py: set by the script that sources this
# tools/bench/cluster.sh — sourced by tools/bench-peer.sh and
# tools/bench-preempt.sh: a ckptd coordinator and node agents on loopback
# (node nK on 127.0.0.K), as tests/ckptd_roles/ starts them, for benchmarks
# whose ranks are real processes.
#
# The caller sets: bin (the build's bin/), work (a private directory),
# py (a python3), and log/die functions. Everything lives under $work:
# token, coord.root, coord.log, nK.root (the agent's index), nK.ckpt (the
# checkpoint root of nK's ranks), nK.sock, nK.log. Only loopback addresses
# are bound; libfabric uses tcp;ofi_rxm on lo.

export FI_TCP_IFACE=lo
export CKPT_FABRIC_PROVIDER="tcp;ofi_rxm"

cl_coord_pid=
cl_coord_addr=
declare -A cl_pid=()   # node index -> agent pid
declare -A cl_args=()  # node index -> the agent's extra flags (for restarts)

# A port free on host now (bound and released: another process may take it
# in between, which ckptd then reports).
cl_free_port() { # host
	"$py" -c 'import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
print(s.getsockname()[1])' "$1"
}

cl_token() {
	umask 077
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
	chmod 600 "$work/token"
}

# None of the caller's CKPT_* settings (they would change what is
# measured), but the fabric provider set above.
cl_unset=()
for v in $(compgen -e); do
	case "$v" in
	CKPT_FABRIC_PROVIDER) ;;
	CKPT_*) cl_unset+=(-u "$v") ;;
	esac
done

# ckptd in that environment. Started as `"${cl_ckptd[@]}" ... &`: env
# execs ckptd, so $! is the daemon's pid (a shell function in the
# background would be a subshell).
cl_ckptd=(env "${cl_unset[@]}")

cl_coord_start() { # [extra ckptd flags...]
	local port
	port=$(cl_free_port 127.0.0.1)
	cl_coord_addr=127.0.0.1:$port
	mkdir -p "$work/coord.root"
	"${cl_ckptd[@]}" "$bin/ckptd" --role coordinator --root "$work/coord.root" --listen "$cl_coord_addr" --token-file "$work/token" \
		--node coord --agent-grace 300s "$@" >>"$work/coord.log" 2>&1 &
	cl_coord_pid=$!
	local _
	for _ in $(seq 100); do
		"$bin/ckpt" status --daemon "$cl_coord_addr" --token-file "$work/token" >/dev/null 2>&1 && return 0
		cl_alive "$cl_coord_pid" || { tail -n 20 "$work/coord.log" >&2; die "the coordinator exited"; }
		sleep 0.1
	done
	die "the coordinator did not come up (see $work/coord.log)"
}

# Starts (or restarts, with the same flags) the agent of node k: nK on
# 127.0.0.K, its Unix socket, index and ranks' checkpoint root under $work.
cl_agent_start() { # k [extra ckptd flags...]
	local k=$1
	shift
	[ $# -gt 0 ] && cl_args[$k]="$*"
	local host=127.0.0.$k sock=$work/n$k.sock port
	port=$(cl_free_port "$host")
	mkdir -p "$work/n$k.root" "$work/n$k.ckpt"
	rm -f "$sock"
	# shellcheck disable=SC2086 # the flags are words
	"${cl_ckptd[@]}" "$bin/ckptd" --role agent --root "$work/n$k.root" --listen "$host:$port" --socket "$sock" \
		--coordinator "$cl_coord_addr" --token-file "$work/token" --node "n$k" --log-level debug \
		${cl_args[$k]} >>"$work/n$k.log" 2>&1 &
	cl_pid[$k]=$!
	local _
	for _ in $(seq 300); do
		[ -S "$sock" ] && return 0
		cl_alive "${cl_pid[$k]}" || { tail -n 20 "$work/n$k.log" >&2; die "agent n$k exited"; }
		sleep 0.1
	done
	die "agent n$k did not come up (see $work/n$k.log)"
}

# 0 while our child pid runs (an exited one stays a zombie until waited for).
cl_alive() { # pid
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# SIGTERM, then waits (ckptd flushes and exits 0); SIGKILL after 30 s.
cl_kill() { # pid
	local p=$1 _
	kill "$p" 2>/dev/null || true
	for _ in $(seq 300); do
		cl_alive "$p" || break
		sleep 0.1
	done
	cl_alive "$p" && kill -9 "$p" 2>/dev/null
	wait "$p" 2>/dev/null || true
}

cl_agent_stop() { # k
	local p=${cl_pid[$1]:-}
	[ -n "$p" ] || return 0
	cl_kill "$p"
	unset "cl_pid[$1]"
}

# Waits until the coordinator lists these nodes up.
cl_wait_up() { # node names...
	local _ st missing n
	for _ in $(seq 200); do
		st=$("$bin/ckpt" status --daemon "$cl_coord_addr" --token-file "$work/token" --json 2>/dev/null || true)
		missing=0
		for n in "$@"; do
			"$py" -c 'import json, sys
st = json.loads(sys.argv[1])
sys.exit(0 if any(a["node"] == sys.argv[2] and a["state"] == "up" for a in st.get("agents", [])) else 1)' \
				"$st" "$n" 2>/dev/null || missing=1
		done
		[ "$missing" = 0 ] && return 0
		sleep 0.1
	done
	die "agents $* not all up at the coordinator"
}

cl_stop_all() {
	local k
	for k in "${!cl_pid[@]}"; do cl_agent_stop "$k"; done
	if [ -n "$cl_coord_pid" ]; then
		cl_kill "$cl_coord_pid"
		cl_coord_pid=
	fi
}

# The command prefix of a rank of job on node k (its agent, its checkpoint
# root, the library's defaults otherwise) into the array cl_env:
# `"${cl_env[@]}" [VAR=value...] program args`. env execs the program, so
# `... &` gives the rank's own pid in $!.
cl_rank_env() { # job rank world k
	# shellcheck disable=SC2034 # used by the scripts that source this
	cl_env=(env "${cl_unset[@]}"
		"CKPT_JOB=$1" "CKPT_RANK=$2" "CKPT_WORLD_SIZE=$3" "CKPT_ROOT=$work/n$4.ckpt"
		"CKPT_DAEMON=unix:$work/n$4.sock" "CKPT_TOKEN_FILE=$work/token"
		"CKPT_TIERS=local_mem,peer_mem,local_disk" "CKPT_DEBUG=INFO")
}
