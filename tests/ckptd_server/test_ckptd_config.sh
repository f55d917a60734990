#!/bin/bash
# ckptd's settings: --help lists every one with its default; precedence
# flag > environment > config file > default; bad values are refused with
# the setting named and exit 2; secrets are refused on the command line.
set -u
CKPTD="${CKPT_BIN:-}/ckptd"
[ -x "$CKPTD" ] || { echo "skip: no ckptd in CKPT_BIN"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/ckptd-config-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# A clean environment: no CKPT_* from the caller.
for v in $(env | grep -o '^CKPT_[A-Z_]*' | grep -v '^CKPT_BIN$'); do unset "$v"; done

help=$("$CKPTD" --help) || fail "--help exited $?"
for s in "config -" "role both" "root -" "listen -" "socket -" "pool-size 1G" "coordinator -" \
         "token-file -" "node -" "max-conns 1024" "idle-timeout 0" "frame-timeout 10s" \
         "handshake-timeout 5s" "shutdown-grace 5s" "out-queue 4M" "log-level info"; do
	set -- $s
	env=CKPT_$(echo "$1" | tr 'a-z-' 'A-Z_')
	[ "$1" = log-level ] && env=CKPT_DEBUG # the one log variable, the library's too
	echo "$help" | grep -Eq -- "^ +--$1 +$env +$2 " || fail "--help lacks --$1 $env default $2"
done
# every setting --print-config knows is in --help
for name in $("$CKPTD" --print-config | cut -d' ' -f1); do
	echo "$help" | grep -- "--$name " >/dev/null || fail "--help lacks --$name"
done

get() { "$@" --print-config | grep "^$SETTING = "; }
cat > "$dir/c.conf" <<CONF
# comment
max-conns = 11
idle_timeout = 7s   # underscores accepted
log-level = warn
CONF
SETTING=max-conns
[ "$(get "$CKPTD")" = "max-conns = 1024  # default" ] || fail "default"
[ "$(CKPT_CONFIG=$dir/c.conf get "$CKPTD")" = "max-conns = 11  # file" ] || fail "file over default"
[ "$(get "$CKPTD" --config "$dir/c.conf")" = "max-conns = 11  # file" ] || fail "--config"
[ "$(CKPT_MAX_CONNS=22 get "$CKPTD" --config "$dir/c.conf")" = "max-conns = 22  # env" ] || fail "env over file"
[ "$(CKPT_MAX_CONNS=22 get "$CKPTD" --config "$dir/c.conf" --max-conns 33)" = "max-conns = 33  # flag" ] || fail "flag over env"
[ "$(CKPT_MAX_CONNS=22 get "$CKPTD" --config="$dir/c.conf" --max-conns=44)" = "max-conns = 44  # flag" ] || fail "--name=value"
SETTING=idle-timeout
[ "$(get "$CKPTD" --config "$dir/c.conf")" = "idle-timeout = 7000ms  # file" ] || fail "file duration"
SETTING=socket
[ "$(get "$CKPTD" --socket unix:/run/x.sock)" = "socket = /run/x.sock  # flag" ] || fail "unix: prefix"
SETTING=role
[ "$(CKPT_ROLE=agent get "$CKPTD")" = "role = agent  # env" ] || fail "role from env"
# one log variable, CKPT_DEBUG (any case); CKPT_LOG_LEVEL only when it is unset
SETTING=log-level
[ "$(CKPT_DEBUG=TRACE get "$CKPTD")" = "log-level = trace  # env" ] || fail "CKPT_DEBUG"
[ "$(CKPT_LOG_LEVEL=debug get "$CKPTD")" = "log-level = debug  # env" ] || fail "CKPT_LOG_LEVEL alias"
[ "$(CKPT_DEBUG=error CKPT_LOG_LEVEL=debug get "$CKPTD")" = "log-level = error  # env" ] || fail "alias over CKPT_DEBUG"
[ "$(CKPT_DEBUG=error get "$CKPTD" --log-level warn)" = "log-level = warn  # flag" ] || fail "flag over CKPT_DEBUG"

# bad values: exit 2, the setting named
bad() { # expected-name, then the command
	local want=$1; shift
	out=$("$@" 2>&1); rc=$?
	[ $rc -eq 2 ] || fail "$* exited $rc, not 2 ($out)"
	echo "$out" | grep -- "$want" >/dev/null || fail "$*: message does not name $want: $out"
}
bad --role "$CKPTD" --role master
bad --listen "$CKPTD" --listen 127.0.0.1
bad --listen "$CKPTD" --listen :7070
bad --listen "$CKPTD" --listen 127.0.0.1:70000
bad --coordinator "$CKPTD" --coordinator unix:/x
bad --socket "$CKPTD" --socket relative.sock
bad --pool-size "$CKPTD" --pool-size 12Q
bad --max-conns "$CKPTD" --max-conns 0
bad --frame-timeout "$CKPTD" --frame-timeout soon
bad --log-level "$CKPTD" --log-level loud
bad CKPT_LOG_LEVEL env CKPT_LOG_LEVEL=loud "$CKPTD" --print-config
bad --node "$CKPTD" --node "bad name"
bad CKPT_MAX_CONNS env CKPT_MAX_CONNS=-1 "$CKPTD" --print-config

printf 'pool-size = lots\n' > "$dir/bad.conf"
bad "bad.conf:1" "$CKPTD" --config "$dir/bad.conf"
bad "unknown setting --bogus" "$CKPTD" --bogus 1
bad "needs a value" "$CKPTD" --listen
# secrets never on the command line, and the value is not echoed
out=$("$CKPTD" --token=s3cr3t-value-xyz 2>&1); rc=$?
[ $rc -eq 2 ] || fail "--token accepted"
echo "$out" | grep "s3cr3t" >/dev/null && fail "--token value echoed"
echo "$out" | grep "token-file" >/dev/null || fail "--token message does not point at --token-file"
# no secret at all, or an unsafe token file: refused before listening
bad "token" "$CKPTD" --socket "$dir/s.sock"
echo "0123456789abcdef0123" > "$dir/tok"; chmod 644 "$dir/tok"
bad "token-file" "$CKPTD" --socket "$dir/s.sock" --token-file "$dir/tok"
[ -e "$dir/s.sock" ] && fail "socket created despite a bad token file"
# nothing to listen on; no root for the indexes
chmod 600 "$dir/tok"
mkdir -p "$dir/root"
bad "listen" "$CKPTD" --token-file "$dir/tok" --root "$dir/root"
bad "root DIR is required" "$CKPTD" --token-file "$dir/tok" --socket "$dir/s.sock"
[ -e "$dir/s.sock" ] && fail "socket created without a root"
echo "ok: help, precedence, bad values"
exit 0
