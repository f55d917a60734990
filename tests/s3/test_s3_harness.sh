#!/usr/bin/env bash
# tests/s3/s3gw.sh itself, on clusters of this test's own: an S3 round trip
# with the keys it made (and refusals with wrong ones), a second gateway on
# the same cluster stopped and restarted (data kept, same port), two
# clusters at once that do not see each other, a failed start that leaves
# nothing running, everything gone within seconds of the owner's kill -9,
# and its access-log request counts.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
GW=$HERE/s3gw.sh
bash "$GW" check || exit $?
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-s3h-XXXXXX")
A= B=
owner=
cleanup() {
	[ -z "$owner" ] || kill -9 "$owner" 2>/dev/null || true
	for d in $A $B; do [ -d "$d" ] && bash "$GW" stop "$d" 2>/dev/null || true; done
	[ -n "${CKPT_TEST_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
envget() { sed -n "s/^$2=//p" "$1"; }
# daemons of a state directory still alive (their command lines name its ceph.conf)
daemons_of() { pgrep -f -- "-c $1/ceph.conf" 2>/dev/null | wc -l || true; }

mpu() { # ENV-DIR ENDPOINT BUCKET: a 1 MiB part and a 1-byte last one; prints Complete's status
	local out id etag1 etag2
	out=$(bash "$GW" curl "$1" -sS -f -X POST "$2/$3/mpu?uploads=")
	id=$(python3 -c 'import re, sys, urllib.parse; print(urllib.parse.quote(re.search("<UploadId>([^<]+)<", sys.argv[1]).group(1), safe=""))' "$out")
	etag1=$(bash "$GW" curl "$1" -sS -f -D - -o /dev/null -T "$tmp/mib" "$2/$3/mpu?partNumber=1&uploadId=$id" | sed -n 's/^[Ee][Tt]ag: *\([^[:space:]]*\).*/\1/p')
	etag2=$(bash "$GW" curl "$1" -sS -f -D - -o /dev/null -T "$tmp/byte" "$2/$3/mpu?partNumber=2&uploadId=$id" | sed -n 's/^[Ee][Tt]ag: *\([^[:space:]]*\).*/\1/p')
	bash "$GW" curl "$1" -sS -o "$tmp/complete" -w '%{http_code}' -X POST --data-binary \
		"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>$etag1</ETag></Part><Part><PartNumber>2</PartNumber><ETag>$etag2</ETag></Part></CompleteMultipartUpload>" \
		"$2/$3/mpu?uploadId=$id"
}
head -c 1048576 /dev/urandom >"$tmp/mib"
printf x >"$tmp/byte"

# --- three clusters started at once: all come up, on different ports ----
t0=$(date +%s%3N)
bash "$GW" start --dir "$tmp/a" --owner $$ >"$tmp/a.env" 2>"$tmp/a.err" & pa=$!
sleep 600 & owner=$!
bash "$GW" start --dir "$tmp/b" --owner "$owner" --bucket other --min-part 1048576 >"$tmp/b.env" 2>"$tmp/b.err" & pb=$!
# e: bluestore in a sparse file, its OSD's data in a folder of its own
bash "$GW" start --dir "$tmp/e" --owner $$ --store bluestore --store-size 4G --osd-dir "$tmp/e-osd" \
	>"$tmp/e.env" 2>"$tmp/e.err" & pe=$!
wait $pa || fail "start a: $(tail -n 20 "$tmp/a.err")"
wait $pb || fail "start b: $(tail -n 20 "$tmp/b.err")"
wait $pe || fail "start e: $(tail -n 20 "$tmp/e.err")"
echo "three clusters up in $(($(date +%s%3N) - t0)) ms (each: $(envget "$tmp/a.env" S3GW_START_MS), $(envget "$tmp/b.env" S3GW_START_MS), $(envget "$tmp/e.env" S3GW_START_MS) ms)"
[ "$(sort -u <(envget "$tmp/a.env" S3GW_PORT) <(envget "$tmp/b.env" S3GW_PORT) <(envget "$tmp/e.env" S3GW_PORT) | wc -l)" = 3 ] ||
	fail "two gateways on one port"
A=$tmp/a B=$tmp/b
EA=$(envget "$tmp/a.env" S3GW_ENDPOINT)
EB=$(envget "$tmp/b.env" S3GW_ENDPOINT)
[ "$EA" != "$EB" ] || fail "both gateways on $EA"
case $EA in http://127.0.0.1:[0-9]*) ;; *) fail "endpoint $EA not on loopback" ;; esac
grep -q '^auth cluster required = cephx' "$A/ceph.conf" || fail "cephx not required"

EE=$(envget "$tmp/e.env" S3GW_ENDPOINT)
[ -f "$tmp/e-osd/block" ] && [ ! -e "$tmp/e/osd" ] || fail "e's bluestore file is not in --osd-dir"
head -c 6000000 /dev/urandom >"$tmp/eobj"
bash "$GW" curl "$tmp/e" -sS -f -T "$tmp/eobj" "$EE/ckpt-test/e" || fail "PUT to bluestore"
bash "$GW" curl "$tmp/e" -sS -f -o "$tmp/eback" "$EE/ckpt-test/e" || fail "GET from bluestore"
cmp -s "$tmp/eobj" "$tmp/eback" || fail "bluestore returned other bytes"
rc=0
bash "$GW" start --dir "$tmp/f" --owner $$ --osd-dir "$tmp/e-osd" >/dev/null 2>"$tmp/f.err" || rc=$?
[ $rc -ne 0 ] && grep -q "not empty" "$tmp/f.err" || fail "--osd-dir of another cluster accepted: $(cat "$tmp/f.err")"
[ -f "$tmp/e-osd/block" ] || fail "a refused start touched another cluster's --osd-dir"

# --- round trip, bit-exact; wrong keys and missing buckets refused -------
head -c 3000000 /dev/urandom >"$tmp/obj"
bash "$GW" curl "$A" -sS -f -T "$tmp/obj" "$EA/ckpt-test/dir/obj" || fail "PUT"
bash "$GW" curl "$A" -sS -f -o "$tmp/back" "$EA/ckpt-test/dir/obj" || fail "GET"
cmp -s "$tmp/obj" "$tmp/back" || fail "GET returned other bytes"
code=$(curl -sS -o "$tmp/err" -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 \
	--user "$(envget "$tmp/a.env" S3GW_ACCESS_KEY):wrongsecret" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	"$EA/ckpt-test/dir/obj")
[ "$code" = 403 ] && grep -q SignatureDoesNotMatch "$tmp/err" || fail "wrong secret: $code $(cat "$tmp/err")"
code=$(bash "$GW" curl "$A" -sS -o "$tmp/err" -w '%{http_code}' "$EA/no-such-bucket/x")
[ "$code" = 404 ] && grep -q NoSuchBucket "$tmp/err" || fail "missing bucket: $code $(cat "$tmp/err")"
code=$(curl -sS -o /dev/null -w '%{http_code}' "$EA/ckpt-test/dir/obj")
[ "$code" = 403 ] || fail "anonymous GET answered $code"
# B's keys and data are its own
code=$(bash "$GW" curl "$B" -sS -o /dev/null -w '%{http_code}' "$EB/ckpt-test/dir/obj")
[ "$code" = 404 ] || fail "cluster b sees a's bucket: $code"
code=$(bash "$GW" curl "$A" -sS -o /dev/null -w '%{http_code}' "$EB/other")
[ "$code" = 403 ] || fail "a's keys work on b: $code"
[ "$(envget "$tmp/b.env" S3GW_MIN_PART)" = 1048576 ] || fail "b's S3GW_MIN_PART"
code=$(mpu "$B" "$EB" other)
[ "$code" = 200 ] || fail "a 1 MiB part with --min-part 1048576: $code $(cat "$tmp/complete")"
bash "$GW" curl "$B" -sS -f -o "$tmp/mpu" "$EB/other/mpu" && cmp -s "$tmp/mpu" <(cat "$tmp/mib" "$tmp/byte") ||
	fail "the multipart object is not its parts"
# a second user has no access to the first one's bucket
read -r ak sk < <(bash "$GW" user "$A" intruder)
code=$(curl -sS -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 --user "$ak:$sk" \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$EA/ckpt-test/dir/obj")
[ "$code" = 403 ] || fail "another user reads the bucket: $code"
code=$(curl -sS -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 \
	--user "$(envget "$tmp/a.env" S3GW_OTHER_ACCESS_KEY):$(envget "$tmp/a.env" S3GW_OTHER_SECRET_KEY)" \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$EA/ckpt-test/dir/obj")
[ "$code" = 403 ] || fail "the env's other user reads the bucket: $code"
# the smallest part: S3's 5 MiB by default (b: --min-part 1048576)
[ "$(envget "$tmp/a.env" S3GW_MIN_PART)" = 5242880 ] || fail "a's S3GW_MIN_PART"
code=$(mpu "$A" "$EA" ckpt-test)
[ "$code" = 400 ] && grep -q EntityTooSmall "$tmp/complete" || fail "a 1 MiB part completed under S3's 5 MiB minimum: $code"

# virtual-host style (BUCKET.localhost) reaches the same bucket
port=$(envget "$tmp/a.env" S3GW_PORT)
bash "$GW" curl "$A" -sS -f -o "$tmp/back2" "http://ckpt-test.localhost:$port/dir/obj" ||
	fail "virtual-host style GET"
cmp -s "$tmp/obj" "$tmp/back2" || fail "virtual-host GET returned other bytes"

# --- the access log's counts ----------------------------------------------
mark=$(bash "$GW" mark "$A")
bash "$GW" curl "$A" -sS -f -o /dev/null "$EA/ckpt-test?list-type=2&prefix=dir%2F"
bash "$GW" curl "$A" -sS -f -o /dev/null -X POST "$EA/ckpt-test/mp?uploads="
bash "$GW" curl "$A" -sS -f -o /dev/null "$EA/ckpt-test?uploads="
bash "$GW" curl "$A" -sS -f -o /dev/null -r 0-9 "$EA/ckpt-test/dir/obj"
sleep 0.3 # the log line is written as the request ends
got=$(bash "$GW" requests "$A" --since "$mark")
python3 - "$got" <<'EOF' || fail "request counts: $got"
import json, sys
d = json.loads(sys.argv[1])
want = {"LIST": 1, "INIT_MPU": 1, "LIST_UPLOADS": 1, "GET": 1}
assert d["kinds"] == want, d["kinds"]
assert d["lists"] == 2, d
EOF
[ "$(bash "$GW" curl "$A" -sS "$EA/ckpt-test?uploads=" | grep -o '<Upload>' | wc -l)" = 2 ] || fail "upload count (mp, and mpu whose Complete was refused)"

# --- a second gateway on cluster a: stopped, restarted, same port, data kept
sleep 600 & gwowner=$!
ex=$(bash "$GW" gw-add "$A" extra --owner "$gwowner") || fail "gw-add"
[ "$ex" != "$EA" ] || fail "second gateway on the first one's port"
bash "$GW" curl "$A" -sS -f -o "$tmp/back3" "$ex/ckpt-test/dir/obj" || fail "GET through the second gateway"
cmp -s "$tmp/obj" "$tmp/back3" || fail "second gateway: other bytes"
bash "$GW" gw-stop "$A" extra --kill
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$ex/" 2>/dev/null || true)
[ "$code" = 000 ] || fail "a killed gateway answered $code"
code=$(bash "$GW" curl "$A" -sS -o /dev/null -w '%{http_code}' "$EA/ckpt-test/dir/obj")
[ "$code" = 200 ] || fail "the first gateway stopped with the second: $code"
bash "$GW" gw-start "$A" extra
bash "$GW" curl "$A" -sS -f -o "$tmp/back4" "$ex/ckpt-test/dir/obj" || fail "GET after the restart"
cmp -s "$tmp/obj" "$tmp/back4" || fail "after the restart: other bytes"
# the first gateway's graceful stop and start (a test's own cluster may)
bash "$GW" gw-stop "$A" gw
bash "$GW" gw-start "$A" gw
bash "$GW" curl "$A" -sS -f -o /dev/null "$EA/ckpt-test/dir/obj" || fail "GET after restarting gw"
# the second gateway's owner dies: that gateway goes, the cluster stays
{ kill -9 "$gwowner"; wait "$gwowner"; } 2>/dev/null || true
for i in $(seq 100); do
	pgrep -f -- "$A/ceph.conf -n client.rgw.extra" >/dev/null || break
	sleep 0.1
done
pgrep -f -- "$A/ceph.conf -n client.rgw.extra" >/dev/null && fail "the second gateway outlived its owner"
bash "$GW" curl "$A" -sS -f -o /dev/null "$EA/ckpt-test/dir/obj" || fail "cluster gone with the second gateway's owner"

# --- stop: nothing left ---------------------------------------------------
[ "$(daemons_of "$A")" -ge 3 ] || fail "expected a's daemons running"
bash "$GW" stop "$A"
[ ! -d "$A" ] || fail "$A still there after stop"
[ "$(daemons_of "$A")" = 0 ] || fail "daemons of a left after stop"
A=

# --- b's owner killed -9: b stops by itself -------------------------------
[ "$(daemons_of "$B")" -ge 3 ] || fail "b's daemons not running"
{ kill -9 "$owner"; wait "$owner"; } 2>/dev/null || true
owner=
for i in $(seq 100); do
	[ "$(daemons_of "$B")" = 0 ] && [ ! -d "$B" ] && break
	sleep 0.1
done
[ "$(daemons_of "$B")" = 0 ] || fail "daemons outlived their owner by 10 s"
[ ! -d "$B" ] || fail "state dir left after the owner died"
B=

# --- the state directory removed under a running cluster: it stops too ----
[ "$(daemons_of "$tmp/e")" -ge 3 ] || fail "e's daemons not running"
rm -rf "$tmp/e"
for i in $(seq 100); do
	[ "$(daemons_of "$tmp/e")" = 0 ] && break
	sleep 0.1
done
[ "$(daemons_of "$tmp/e")" = 0 ] || fail "daemons outlived their removed state dir by 10 s"

# --- a start that fails leaves nothing running ----------------------------
rc=0
bash "$GW" start --dir "$tmp/d" --owner $$ --set 'mon data = /proc/ckpt-no-such-dir' >/dev/null 2>"$tmp/d.err" || rc=$?
[ $rc -ne 0 ] || fail "start with an unusable mon data succeeded"
[ "$(daemons_of "$tmp/d")" = 0 ] || fail "a failed start left daemons"
[ ! -d "$tmp/d" ] || fail "a failed start left its directory"
grep -q "start failed" "$tmp/d.err" || fail "no explanation of the failed start: $(cat "$tmp/d.err")"
echo "PASS"
