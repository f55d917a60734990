# s3_lib.sh - a real S3 server from a script test (sourced; bash). The same
# things as s3gw_helper.h for the C tests:
#
#   . "$CKPT_TEST_DATA/s3/s3_lib.sh"
#   s3_open "$tmp"            the CTest run's shared gateway ($CKPT_S3GW_ENV),
#                             or one of this script's own under $tmp; exports
#                             S3GW_ENDPOINT, S3GW_PORT, S3GW_REGION,
#                             S3GW_ACCESS_KEY, S3GW_SECRET_KEY, AWS_ACCESS_KEY_ID,
#                             AWS_SECRET_ACCESS_KEY, S3GW_DIR, S3GW_LOG...;
#                             exits 77 without Ceph (1 with CKPT_REQUIRE_S3=1)
#   b=$(s3_new_bucket flush)  a fresh bucket
#   s3_curl -sS "$S3GW_ENDPOINT/$b/key"       signed curl (canonical queries)
#   s3_count_objects "$b" prefix/; s3_count_uploads "$b" prefix/
#   s3_gw_add r1              a gateway of the script's own on the same
#                             cluster: S3GW_X_ENDPOINT, S3GW_X_NAME
#   s3_gw_stop "$S3GW_X_NAME" [--kill]; s3_gw_start "$S3GW_X_NAME"
#   s3_proxy_start "$tmp" [ENDPOINT]           S3P_ENDPOINT, S3P_PORT, S3P_PID
#   s3_proxy_rule '{"kind":"PUT_PART","action":"status","status":503}'
#   s3_proxy_count lists; s3_proxy_count PUT_PART 503; s3_proxy_wait PUT_PART 3 30
#   s3_proxy_reset; s3_proxy_release; s3_proxy_stop
#   s3_close                  stops the script's own gateway (the shared one
#                             stays); a script that dies has its gateway and
#                             proxy stopped within seconds anyway
S3_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S3GW_SH=$S3_LIB_DIR/s3gw.sh
S3_OWN=
S3P_PID=
S3_SEQ=0

s3_load_env() {
	local k v
	while IFS='=' read -r k v; do
		[ -n "$k" ] && export "$k=$v"
	done <"$1"
}

s3_open() {
	local tmp=${1:?a temp dir}
	local rc=0
	bash "$S3GW_SH" check || exit $?
	if [ -n "${CKPT_S3GW_ENV:-}" ] && [ -r "$CKPT_S3GW_ENV" ]; then
		s3_load_env "$CKPT_S3GW_ENV"
		return 0
	fi
	bash "$S3GW_SH" start --dir "$tmp/s3gw" --owner $$ >"$tmp/s3gw.env" || rc=$?
	[ $rc -eq 0 ] || { [ $rc -eq 77 ] && exit 77; echo "s3_open: s3gw.sh start failed ($rc)" >&2; exit 1; }
	s3_load_env "$tmp/s3gw.env"
	S3_OWN=$S3GW_DIR
}

s3_close() {
	s3_proxy_stop
	if [ -n "$S3_OWN" ]; then
		bash "$S3GW_SH" stop "$S3_OWN" || true
		S3_OWN=
	fi
}

s3_curl() { bash "$S3GW_SH" curl "$S3GW_DIR" "$@"; }

s3_new_bucket() {
	local n
	S3_SEQ=$((S3_SEQ + 1))
	n=$(printf '%.24s-%d-%d-%06x' "${1:-t}" $$ "$S3_SEQ" $((RANDOM * 32768 + RANDOM)) | tr 'A-Z_' 'a-z-')
	bash "$S3GW_SH" bucket "$S3GW_DIR" "$n"
}

s3_qenc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

s3_count_objects() {
	local out
	out=$(s3_curl -sS -f "$S3GW_ENDPOINT/$1?list-type=2&prefix=$(s3_qenc "${2:-}")") || return 1
	printf '%s' "$out" | grep -o '<Key>' | wc -l
}

s3_count_uploads() {
	local out
	out=$(s3_curl -sS -f "$S3GW_ENDPOINT/$1?prefix=$(s3_qenc "${2:-}")&uploads=") || return 1
	printf '%s' "$out" | grep -o '<Upload>' | wc -l
}

s3_gw_add() {
	local name
	name=$(printf '%.8s%d' "${1:?name}" $(($$ % 100000000)))
	S3GW_X_ENDPOINT=$(bash "$S3GW_SH" gw-add "$S3GW_DIR" "$name" --owner $$) || return 1
	S3GW_X_NAME=$name
	S3GW_X_PORT=${S3GW_X_ENDPOINT##*:}
	S3GW_X_LOG=$S3GW_DIR/log/client.rgw.$name.log
	export S3GW_X_ENDPOINT S3GW_X_NAME S3GW_X_PORT S3GW_X_LOG
}

s3_gw_stop() {
	[ "${1:?gateway name}" != gw ] || [ -n "$S3_OWN" ] || { echo "s3_gw_stop: not the shared gateway (s3_gw_add)" >&2; return 1; }
	bash "$S3GW_SH" gw-stop "$S3GW_DIR" "$@"
}
s3_gw_start() { bash "$S3GW_SH" gw-start "$S3GW_DIR" "${1:?gateway name}"; }

# s3_proxy_start DIR [ENDPOINT]: a proxy in front of ENDPOINT (default: the
# gateway), dying with this script.
s3_proxy_start() {
	local dir=${1:?dir} ep=${2:-$S3GW_ENDPOINT} i
	local pf="$dir/s3proxy.port"
	rm -f "$pf"
	python3 "$S3_LIB_DIR/s3proxy.py" --upstream "${ep#http://}" --owner $$ \
		</dev/null >"$pf" 2>>"$dir/s3proxy.log" &
	S3P_PID=$!
	for i in $(seq 200); do
		[ -s "$pf" ] && break
		kill -0 "$S3P_PID" 2>/dev/null || { echo "s3proxy.py exited: $(tail -n 5 "$dir/s3proxy.log")" >&2; return 1; }
		sleep 0.05
	done
	S3P_PORT=$(head -n 1 "$pf")
	[ -n "$S3P_PORT" ] || { echo "s3proxy.py: no port" >&2; return 1; }
	S3P_ENDPOINT=http://127.0.0.1:$S3P_PORT
	export S3P_PORT S3P_ENDPOINT
}

s3_proxy_stop() {
	[ -n "${S3P_PID:-}" ] || return 0
	kill "$S3P_PID" 2>/dev/null || true
	wait "$S3P_PID" 2>/dev/null || true
	S3P_PID=
}

s3_proxy_ctl() { curl -sS -f --max-time 660 -X "$1" ${3:+--data-binary "$3"} "$S3P_ENDPOINT$2"; }
s3_proxy_rule() { s3_proxy_ctl POST /_proxy/rule "$1" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p'; }
s3_proxy_clear() { s3_proxy_ctl DELETE /_proxy/rules >/dev/null; }
s3_proxy_reset() { s3_proxy_ctl POST /_proxy/reset >/dev/null; }
s3_proxy_release() { s3_proxy_ctl POST /_proxy/release >/dev/null; }
s3_proxy_count() { s3_proxy_ctl GET "/_proxy/count?kind=$1${2:+&status=$2}"; }
s3_proxy_stats() { s3_proxy_ctl GET /_proxy/stats; }
# s3_proxy_wait KIND N TIMEOUT_S: 0 once N requests of KIND arrived, 1 on timeout
s3_proxy_wait() {
	local code
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 660 \
		"$S3P_ENDPOINT/_proxy/wait?kind=$1&count=$2&timeout=${3:-30}")
	[ "$code" = 200 ]
}
