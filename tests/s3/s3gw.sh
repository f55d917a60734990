#!/usr/bin/env bash
# s3gw.sh - a real S3 server for the tests and benchmarks: Debian's Ceph as one
# monitor, one OSD and one or more RADOS gateways (radosgw), cephx on, every
# daemon on 127.0.0.1, every file under one state directory, every port free.
# docs/testing.md ("Tests against a real S3 server") describes the use.
#
#   s3gw.sh start [--dir DIR] [--owner PID] [--env-file F] [--store memstore|bluestore]
#                 [--store-size BYTES] [--osd-dir D] [--bucket NAME] [--min-part BYTES]
#                 [--set 'option = value']... [--max-seconds N]
#       Starts the cluster, creates an S3 user, a second one without rights
#       on the first one's buckets, and a bucket, and prints the environment
#       (KEY=VALUE lines, also written to DIR/env and --env-file).
#       --min-part: the smallest multipart part but the last (S3's 5 MiB).
#       --osd-dir: the OSD's data (bluestore's file) there instead of DIR/osd
#       (a disk, not a tmpfs: bluestore writes with O_DIRECT); emptied at
#       start, left for the caller to remove.
#       Everything is stopped, and DIR removed, when PID (default: the
#       caller) exits, after --max-seconds (default 7200), or on `stop`.
#   s3gw.sh stop DIR|ENV_FILE                stops every daemon, removes DIR
#   s3gw.sh bucket DIR NAME                  creates a bucket
#   s3gw.sh user DIR UID                     another S3 user: prints ACCESS SECRET
#   s3gw.sh gw-add DIR NAME [--owner PID]    one more gateway on the same
#                                            cluster (own port): prints its endpoint
#   s3gw.sh gw-stop DIR [NAME] [--kill]      stops a gateway (SIGTERM, or SIGKILL)
#   s3gw.sh gw-start DIR [NAME]              starts it again, same port
#   s3gw.sh curl DIR CURL-ARGS...            curl with SigV4 and the user's keys
#   s3gw.sh requests DIR [NAME] [--since N] [--bucket B]
#                                            the gateway's requests by kind (JSON),
#                                            from its access log
#   s3gw.sh mark DIR [NAME]                  a mark for `requests --since`
#   s3gw.sh env DIR                          prints the environment again
#   s3gw.sh check                            exit 0 if Ceph is installed, else
#                                            77 (1 with CKPT_REQUIRE_S3=1)
#
# DIR may be given as the env file of a `start --env-file` too. Gateway names
# are letters and digits; the first is "gw". Exit 77: Ceph is not installed
# (1 when CKPT_REQUIRE_S3=1: CI installs it, so there a skip is a failure).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/s3gw.sh
PY=${S3GW_PYTHON:-python3}
START_S=${S3GW_START_S:-90} # a cluster not serving S3 within this failed

die() { echo "s3gw: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
# How long each step of a start took: DIR/log/phases (ms since the start).
phase() { echo "$2 $(($(now_ms) - ${S3GW_T0:-0}))" >>"$1/log/phases"; }

need_ceph() {
	local b miss=()
	for b in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool curl python3; do
		command -v "$b" >/dev/null 2>&1 || miss+=("$b")
	done
	[ ${#miss[@]} -eq 0 ] && return 0
	if [ "${CKPT_REQUIRE_S3:-}" = 1 ]; then
		echo "s3gw: missing ${miss[*]} (CKPT_REQUIRE_S3=1: tools/deps.sh installs ceph-mon ceph-osd radosgw)" >&2
		exit 1
	fi
	echo "skip: missing ${miss[*]} (tools/deps.sh: ckpt_install_deps installs Ceph)" >&2
	exit 77
}

# A TCP port on 127.0.0.1 that was free a moment ago.
free_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The state directory, from a directory or from an env file naming it.
resolve_dir() {
	local d=${1:?state directory or env file}
	if [ -f "$d" ]; then
		d=$(sed -n 's/^S3GW_DIR=//p' "$d")
		[ -n "$d" ] || die "$1: no S3GW_DIR in it"
	fi
	[ -f "$d/ceph.conf" ] || die "$d: not a gateway state directory (no ceph.conf)"
	echo "$d"
}

# /proc/PID/stat's start time: a pid file names our process only while it matches.
pid_start() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null || true; }

# Is the process of pid file F (written by run_daemon) still ours and alive?
alive() {
	local f=$1 pid st s
	[ -f "$f" ] || return 1
	read -r pid st <"$f" || return 1
	s=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
	[ -n "$s" ] && [ "$s" != Z ] && [ "$(pid_start "$pid")" = "$st" ]
}

# Signals the process of pid file F, if it is still ours.
signal_pidfile() {
	local f=$1 sig=$2 pid st
	alive "$f" || return 0
	read -r pid st <"$f"
	kill "-$sig" "$pid" 2>/dev/null || true
}

# Waits (up to MS milliseconds) for the process of pid file F to be gone.
wait_gone() {
	local f=$1 ms=$2 t0
	t0=$(now_ms)
	while alive "$f"; do
		[ $(($(now_ms) - t0)) -lt "$ms" ] || return 1
		sleep 0.05
	done
}

# run_daemon DIR NAME CMD...: starts CMD in its own session, its output in
# DIR/log/NAME.out, never on the caller's stdout or stderr (CTest waits for
# a pipe that a daemon holds); DIR/pids/NAME: "pid starttime".
run_daemon() {
	local dir=$1 name=$2 pid
	shift 2
	setsid "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
	pid=$!
	echo "$pid $(pid_start "$pid")" >"$dir/pids/$name"
	disown "$pid" 2>/dev/null || true # no "Killed" notice from this shell at stop
}

# Waits until 127.0.0.1:PORT accepts connections, or pid file F's process
# died, or MS milliseconds passed.
wait_port() {
	local port=$1 f=$2 ms=$3 t0
	t0=$(now_ms)
	while :; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
		alive "$f" || return 1
		[ $(($(now_ms) - t0)) -lt "$ms" ] || return 1
		sleep 0.05
	done
}

rand_str() { # N characters of the alphabet given
	"$PY" -c 'import secrets, sys; print("".join(secrets.choice(sys.argv[2]) for _ in range(int(sys.argv[1]))))' "$1" "$2"
}

gw_valid() { [[ $1 =~ ^[a-z][a-z0-9]{0,15}$ ]] || die "gateway name '$1': lowercase letters and digits, 16 at most"; }

# Starts gateway NAME of DIR on its recorded port (DIR/gw/NAME.port); waits
# until it answers HTTP.
gw_run() {
	local dir=$1 name=$2 port
	port=$(cat "$dir/gw/$name.port")
	run_daemon "$dir" "rgw.$name" radosgw -f -c "$dir/ceph.conf" -n "client.rgw.$name" \
		--rgw-frontends "beast endpoint=127.0.0.1:$port"
	local t0 code
	t0=$(now_ms)
	while :; do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/" || true)
		[ "$code" = 200 ] && return 0
		alive "$dir/pids/rgw.$name" || { tail -n 20 "$dir/log/rgw.$name.out" "$dir/log/client.rgw.$name.log" >&2 2>/dev/null || true; return 1; }
		[ $(($(now_ms) - t0)) -lt $((START_S * 1000)) ] || { echo "s3gw: gateway $name not answering after ${START_S}s" >&2; return 1; }
		sleep 0.1
	done
}

# Stops every daemon of DIR (gateways, OSD, monitor: SIGKILL, the data is
# thrown away) and its watchers, then removes DIR unless CKPT_TEST_KEEP is set.
do_stop() {
	local dir=$1 f
	[ -d "$dir/pids" ] || return 0
	for f in "$dir"/pids/*; do
		[ -e "$f" ] || continue
		[ "${S3GW_IN_WATCH:-}" = "${f##*/}" ] && continue
		signal_pidfile "$f" KILL
	done
	for f in "$dir"/pids/*; do
		[ -e "$f" ] || continue
		[ "${S3GW_IN_WATCH:-}" = "${f##*/}" ] && continue
		wait_gone "$f" 10000 || echo "s3gw: ${f##*/} did not die" >&2
	done
	if [ -n "${CKPT_TEST_KEEP:-}" ]; then
		echo "s3gw: kept $dir" >&2
	else
		rm -rf "$dir"
	fi
}

# The watcher: stops everything of DIR when OWNER (pid, start time) is gone,
# DIR is gone (removed under a running cluster), or after MAX seconds.
# WHAT: "all", or "rgw.NAME" for a gateway added by a test (gw-add --owner),
# which stops only that one. It remembers every pid file it has seen, so
# that it can kill their processes even once DIR is gone.
watch_loop() {
	local dir=$1 owner=$2 ostart=$3 max=$4 what=$5 t0 f pid st
	declare -A seen=()
	t0=$(date +%s)
	while :; do
		for f in "$dir"/pids/*; do
			[ -f "$f" ] || continue
			[ "$what" = all ] || [ "${f##*/}" = "$what" ] || continue
			[ "${f##*/}" = "${S3GW_IN_WATCH:-}" ] && continue
			read -r pid st <"$f" 2>/dev/null && [ -n "$st" ] && seen[$pid]=$st
		done
		[ -d "$dir/pids" ] && [ "$(pid_start "$owner")" = "$ostart" ] &&
			[ $(($(date +%s) - t0)) -lt "$max" ] || break
		sleep 1
	done
	if [ "$what" = all ] && [ -d "$dir/pids" ]; then
		echo "s3gw: owner $owner gone or ${max}s passed: stopping $dir" >&2
		do_stop "$dir"
	fi
	for pid in "${!seen[@]}"; do
		[ "$(pid_start "$pid")" = "${seen[$pid]}" ] && kill -KILL "$pid" 2>/dev/null
	done
	return 0
}

start_watch() {
	local dir=$1 owner=$2 max=$3 what=$4 tag=$5 ostart
	ostart=$(pid_start "$owner")
	[ -n "$ostart" ] || die "owner pid $owner does not exist"
	S3GW_IN_WATCH=$tag run_daemon "$dir" "$tag" bash "$SELF" _watch "$dir" "$owner" "$ostart" "$max" "$what"
}

write_conf() {
	local dir=$1 fsid=$2 mport=$3 store=$4 size=$5 osd=$6
	shift 6
	cat >"$dir/ceph.conf" <<EOF
# written by s3gw.sh: a throwaway one-node cluster on loopback
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mport
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr2 = false
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
crash dir = $dir/crash
mon data = $dir/mon
mon data avail warn = 1
mon data avail crit = 0
mon allow pool delete = true
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 2000
osd data = $osd
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
# a new pool (the gateway makes seven on first use) waits for a map epoch:
# the monitor proposes every 1 s by default
paxos propose interval = 0.05
paxos min wait = 0.01
# A gateway a test killed keeps its cache watch on the control objects
# until this timeout (30 s by default), and until then every metadata
# change (a new bucket) waits for its notify to time out: after
# test_s3_helper's kill -9, the next tests' buckets took 28 s each
osd client watch timeout = 10
EOF
	case $store in
	memstore) cat >>"$dir/ceph.conf" <<EOF
osd objectstore = memstore
memstore device bytes = $size
EOF
	;;
	bluestore) cat >>"$dir/ceph.conf" <<EOF
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $size
bluestore fsck on mkfs = false
bluestore fsck on mount = false
bluestore cache autotune = false
bluestore cache size = 268435456
osd memory target = 939524096
EOF
	;;
	*) die "--store $store: memstore or bluestore" ;;
	esac
	local s
	for s in "$@"; do
		[ -n "$s" ] && printf '%s\n' "$s" >>"$dir/ceph.conf"
	done
	cat >>"$dir/ceph.conf" <<EOF
[client]
# virtual-host style: BUCKET.localhost resolves to loopback (libcurl does it itself)
rgw dns name = localhost
rgw thread pool size = 128
# the access log: one "beast:" line per request ("requests" counts them)
debug rgw = 1
EOF
}

print_env() {
	local dir=$1
	cat "$dir/env"
}

# On a failed start: the logs' tails to stderr, and nothing left running.
start_failed() {
	local rc=$? f dir=${S3GW_STARTING:-}
	[ $rc -ne 0 ] && [ -n "$dir" ] || return 0
	echo "s3gw: start failed; the logs:" >&2
	for f in "$dir"/log/*; do
		[ -s "$f" ] && { echo "--- ${f##*/}" >&2; tail -n 15 "$f" >&2; }
	done
	do_stop "$dir"
}

cmd_start() {
	local dir="" owner=$PPID envfile="" store=memstore size="" bucket=ckpt-test max=7200 minpart=5242880 osddir=""
	local sets=()
	while [ $# -gt 0 ]; do
		case $1 in
		--dir) dir=$2; shift 2 ;;
		--owner) owner=$2; shift 2 ;;
		--env-file) envfile=$2; shift 2 ;;
		--store) store=$2; shift 2 ;;
		--store-size) size=$2; shift 2 ;;
		--bucket) bucket=$2; shift 2 ;;
		--set) sets+=("$2"); shift 2 ;;
		--min-part) minpart=$2; shift 2 ;;
		--osd-dir) osddir=$2; shift 2 ;;
		--max-seconds) max=$2; shift 2 ;;
		*) die "start: unknown argument '$1'" ;;
		esac
	done
	need_ceph
	[[ $minpart =~ ^[0-9]+$ ]] || die "--min-part $minpart: bytes"
	if [ -n "$osddir" ] && [ -e "$osddir" ] && [ -n "$(ls -A "$osddir")" ]; then
		die "--osd-dir $osddir is not empty"
	fi
	sets+=("rgw multipart min part size = $minpart")
	[ -n "$size" ] || { [ "$store" = memstore ] && size=$((2 << 30)) || size=$((32 << 30)); }
	if [ -z "$dir" ]; then
		dir=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-s3gw-XXXXXX")
	else
		mkdir -p "$dir"
		[ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
	fi
	# Unix socket paths (the daemons' admin sockets) hold 107 bytes.
	[ ${#dir} -le 70 ] || die "$dir: too long a path for the admin sockets (set TMPDIR shorter)"
	local t0 tries=0
	t0=$(now_ms)
	S3GW_T0=$t0
	mkdir -p "$dir/pids" "$dir/log"
	# The watcher first: whatever happens from here on, the daemons die with the owner.
	start_watch "$dir" "$owner" "$max" all watch
	S3GW_STARTING=$dir
	trap start_failed EXIT
	while :; do
		tries=$((tries + 1))
		if start_cluster "$dir" "$store" "$size" "${osddir:-$dir/osd}" "${sets[@]+"${sets[@]}"}"; then break; fi
		[ $tries -lt 3 ] || die "the cluster did not start (3 tries)"
		echo "s3gw: retrying with other ports" >&2
		local f
		for f in "$dir"/pids/*; do [ "${f##*/}" = watch ] || signal_pidfile "$f" KILL; done
		for f in "$dir"/pids/*; do [ "${f##*/}" = watch ] || { wait_gone "$f" 10000 || true; rm -f "$f"; }; done
		find "$dir" -mindepth 1 -maxdepth 1 ! -name pids ! -name log -exec rm -rf {} +
	done
	local ak sk rak rsk port p1 p2
	ak=$(rand_str 20 ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789)
	sk=$(rand_str 40 ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789)
	rak=$(rand_str 20 ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789)
	rsk=$(rand_str 40 ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789)
	# The user, and a second one with no rights on the first one's buckets
	# (permission errors), made at once: about a second each.
	radosgw-admin -c "$dir/ceph.conf" user create --uid=ckpt --display-name="ckpt tests" \
		--access-key="$ak" --secret-key="$sk" >"$dir/log/user.out" 2>&1 & p1=$!
	radosgw-admin -c "$dir/ceph.conf" user create --uid=other --display-name="another user" \
		--access-key="$rak" --secret-key="$rsk" >"$dir/log/user-other.out" 2>&1 & p2=$!
	wait $p1 || die "radosgw-admin user create failed: $(tail -n 3 "$dir/log/user.out")"
	wait $p2 || die "radosgw-admin user create (other) failed: $(tail -n 3 "$dir/log/user-other.out")"
	phase "$dir" user
	port=$(cat "$dir/gw/gw.port")
	cat >"$dir/env" <<EOF
S3GW_DIR=$dir
S3GW_ENDPOINT=http://127.0.0.1:$port
S3GW_HOST=127.0.0.1
S3GW_PORT=$port
S3GW_REGION=us-east-1
S3GW_VHOST_DOMAIN=localhost
S3GW_BUCKET=$bucket
S3GW_ACCESS_KEY=$ak
S3GW_SECRET_KEY=$sk
AWS_ACCESS_KEY_ID=$ak
AWS_SECRET_ACCESS_KEY=$sk
S3GW_OTHER_ACCESS_KEY=$rak
S3GW_OTHER_SECRET_KEY=$rsk
S3GW_MIN_PART=$minpart
S3GW_LOG=$dir/log/client.rgw.gw.log
S3GW_CONF=$dir/ceph.conf
S3GW_STORE=$store
EOF
	cmd_bucket "$dir" "$bucket" >/dev/null
	phase "$dir" bucket
	warm_up "$dir" "$bucket"
	phase "$dir" warm-up
	echo "S3GW_START_MS=$(($(now_ms) - t0))" >>"$dir/env"
	[ -z "$envfile" ] || cp "$dir/env" "$envfile"
	trap - EXIT
	print_env "$dir"
}

# One attempt at monitor, OSD and first gateway on fresh ports; 1 if one of
# them did not come up (a port taken meanwhile, most likely).
start_cluster() {
	local dir=$1 store=$2 size=$3 osd=$4 fsid mport uuid
	shift 4
	# (a retry's: what an earlier attempt left there is ours, the folder was empty)
	[ ! -d "$osd" ] || find "$osd" -mindepth 1 -delete || return 1
	mkdir -p "$dir/run" "$dir/crash" "$dir/mon" "$osd" "$dir/gw" || return 1
	fsid=$(cat /proc/sys/kernel/random/uuid)
	uuid=$(cat /proc/sys/kernel/random/uuid)
	mport=$(free_port) && free_port >"$dir/gw/gw.port" || return 1
	write_conf "$dir" "$fsid" "$mport" "$store" "$size" "$osd" "$@" || return 1
	# Every key at once: the monitor's mkfs loads them, with their caps, into
	# its auth database, so nothing needs `ceph auth add` afterwards.
	local k="$dir/keyring" log="$dir/log/mkfs.out"
	{
		ceph-authtool --create-keyring "$k" --gen-key -n mon. --cap mon 'allow *' &&
		ceph-authtool "$k" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' &&
		ceph-authtool "$k" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' &&
		ceph-authtool "$k" --gen-key -n client.rgw.gw --cap mon 'allow rw' --cap osd 'allow rwx' &&
		ceph-authtool --create-keyring "$osd/keyring" -n osd.0 --add-key "$(ceph-authtool "$k" -n osd.0 -p)" &&
		monmaptool --create --add a "v1:127.0.0.1:$mport" --fsid "$fsid" "$dir/monmap"
	} >>"$log" 2>&1 || { tail -n 5 "$log" >&2; return 1; }
	ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$k" >>"$log" 2>&1 || return 1
	run_daemon "$dir" mon ceph-mon -f -c "$dir/ceph.conf" -i a || return 1
	phase "$dir" mon-mkfs
	wait_port "$mport" "$dir/pids/mon" 20000 || return 1
	phase "$dir" mon-up
	timeout 60 ceph -c "$dir/ceph.conf" --connect-timeout 30 osd new "$uuid" 0 >>"$log" 2>&1 || return 1
	phase "$dir" osd-new
	ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$uuid" >>"$log" 2>&1 || return 1
	phase "$dir" osd-mkfs
	run_daemon "$dir" osd ceph-osd -f -c "$dir/ceph.conf" -i 0 || return 1
	gw_run "$dir" gw || return 1
	phase "$dir" gw-up
}

# The gateway makes its data pools on the first object and the first
# multipart upload (a second or more each): made here, so that no test's
# first request waits for them. Leaves nothing behind.
warm_up() {
	local dir=$1 bucket=$2 ep out id
	ep=$(sed -n 's/^S3GW_ENDPOINT=//p' "$dir/env")
	printf 'warm-up' >"$dir/log/warm-up.obj"
	cmd_curl "$dir" -sS -f -o /dev/null -T "$dir/log/warm-up.obj" "$ep/$bucket/s3gw-warm-up" ||
		die "warm-up: PUT failed"
	cmd_curl "$dir" -sS -f -o /dev/null -X DELETE "$ep/$bucket/s3gw-warm-up" || die "warm-up: DELETE failed"
	out=$(cmd_curl "$dir" -sS -f -X POST "$ep/$bucket/s3gw-warm-up?uploads=") || die "warm-up: multipart initiate failed"
	id=$(printf '%s' "$out" | sed -n 's:.*<UploadId>\([^<]*\)</UploadId>.*:\1:p')
	[ -n "$id" ] || die "warm-up: no UploadId in: $out"
	id=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$id")
	cmd_curl "$dir" -sS -f -o /dev/null -X DELETE "$ep/$bucket/s3gw-warm-up?uploadId=$id" ||
		die "warm-up: multipart abort failed"
}

cmd_bucket() {
	local dir name out
	dir=$(resolve_dir "${1:-}")
	name=${2:?bucket name}
	out=$(cmd_curl "$dir" -sS -o /dev/stderr -w '%{http_code}' -X PUT "$(sed -n 's/^S3GW_ENDPOINT=//p' "$dir/env")/$name" 2>&1) || true
	case $out in
	*200) echo "$name" ;;
	*) die "creating bucket $name: $out" ;;
	esac
}

cmd_user() {
	local dir uid ak sk
	dir=$(resolve_dir "${1:-}")
	uid=${2:?uid}
	ak=$(rand_str 20 ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789)
	sk=$(rand_str 40 ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789)
	radosgw-admin -c "$dir/ceph.conf" user create --uid="$uid" --display-name="$uid" \
		--access-key="$ak" --secret-key="$sk" >>"$dir/log/user.out" 2>&1 || die "radosgw-admin user create $uid failed"
	echo "$ak $sk"
}

cmd_gw_add() {
	local dir name owner="" port
	dir=$(resolve_dir "${1:-}")
	name=${2:?gateway name}
	shift 2
	[ "${1:-}" = --owner ] && owner=$2
	gw_valid "$name"
	[ ! -e "$dir/gw/$name.port" ] || die "gateway $name exists"
	timeout 60 ceph -c "$dir/ceph.conf" --connect-timeout 30 auth get-or-create "client.rgw.$name" \
		mon 'allow rw' osd 'allow rwx' >>"$dir/keyring" 2>>"$dir/log/user.out" || die "ceph auth get-or-create client.rgw.$name failed"
	port=$(free_port)
	echo "$port" >"$dir/gw/$name.port"
	[ -z "$owner" ] || start_watch "$dir" "$owner" 7200 "rgw.$name" "watch.$name"
	gw_run "$dir" "$name" || die "gateway $name did not start"
	echo "http://127.0.0.1:$port"
}

cmd_gw_stop() {
	local dir name=gw sig=TERM
	dir=$(resolve_dir "${1:-}")
	shift
	while [ $# -gt 0 ]; do
		case $1 in --kill) sig=KILL ;; *) name=$1 ;; esac
		shift
	done
	gw_valid "$name"
	local f="$dir/pids/rgw.$name"
	[ -e "$f" ] || die "no gateway $name"
	signal_pidfile "$f" "$sig"
	wait_gone "$f" 15000 || { signal_pidfile "$f" KILL; wait_gone "$f" 5000 || die "gateway $name does not die"; }
}

cmd_gw_start() {
	local dir name=${2:-gw}
	dir=$(resolve_dir "${1:-}")
	gw_valid "$name"
	[ -e "$dir/gw/$name.port" ] || die "no gateway $name"
	alive "$dir/pids/rgw.$name" && die "gateway $name is running"
	local t0
	t0=$(now_ms)
	# The port was ours a moment ago; something else may have taken it since.
	gw_run "$dir" "$name" || die "gateway $name did not start again on port $(cat "$dir/gw/$name.port")"
	echo "gateway $name back in $(($(now_ms) - t0)) ms" >&2
}

cmd_curl() {
	local dir
	dir=$(resolve_dir "${1:-}")
	shift
	local ak sk
	ak=$(sed -n 's/^S3GW_ACCESS_KEY=//p' "$dir/env")
	sk=$(sed -n 's/^S3GW_SECRET_KEY=//p' "$dir/env")
	# curl 7.88 signs the query string as written: give it in canonical form
	# (keys sorted, "uploads=" rather than "uploads").
	curl --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}

gw_log() { echo "$1/log/client.rgw.$2.log"; }

cmd_mark() {
	local dir name=${2:-gw}
	dir=$(resolve_dir "${1:-}")
	gw_valid "$name"
	local f
	f=$(gw_log "$dir" "$name")
	[ -f "$f" ] && stat -c %s "$f" || echo 0
}

cmd_requests() {
	local dir name=gw since=0 bucket=()
	dir=$(resolve_dir "${1:-}")
	shift
	while [ $# -gt 0 ]; do
		case $1 in --since) since=$2; shift 2 ;; --bucket) bucket=(--bucket "$2"); shift 2 ;; *) name=$1; shift ;; esac
	done
	gw_valid "$name"
	exec "$PY" "$HERE/s3proxy.py" --classify-log "$(gw_log "$dir" "$name")" --since "$since" "${bucket[@]+"${bucket[@]}"}"
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) d=$(resolve_dir "${2:-}") && do_stop "$d" ;;
fixture-start)
	# CTest's FIXTURES_SETUP: the gateway of this CTest run, whose process
	# (our parent) owns it; an earlier run's left behind is stopped first.
	f=${2:?env file}
	[ ! -f "$f" ] || { "$SELF" stop "$f" 2>/dev/null || true; rm -f "$f"; }
	shift 2
	# 1 MiB parts: multipart uploads of a few MiB keep the tests' bytes small.
	cmd_start --owner "$PPID" --env-file "$f" --min-part 1048576 "$@" ;;
fixture-stop)
	f=${2:?env file}
	if [ -f "$f" ]; then d=$(resolve_dir "$f"); do_stop "$d"; rm -f "$f"; fi ;;
bucket) shift; cmd_bucket "$@" ;;
user) shift; cmd_user "$@" ;;
gw-add) shift; cmd_gw_add "$@" ;;
gw-stop) shift; cmd_gw_stop "$@" ;;
gw-start) shift; cmd_gw_start "$@" ;;
curl) shift; cmd_curl "$@" ;;
requests) shift; cmd_requests "$@" ;;
mark) shift; cmd_mark "$@" ;;
env) print_env "$(resolve_dir "${2:-}")" ;;
check) need_ceph ;;
_watch) shift; watch_loop "$@" ;;
*) sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
