#!/bin/bash
# Hostile shard files through the ckpt tool: a region name that would leave
# the output directory ("../evil" and friends), with the index left as it was
# (the file no longer matches the footer checksum the index recorded) and
# after `ckpt reindex` (the index rebuilt from the hostile file itself).
# verify must exit 3, restore must exit non-zero and write nothing outside
# --out. Also: region names that collide with restore's temporary names, and
# a region whose size makes the chunk count computation wrap; region names
# a terminal would act on; save and import inputs that are FIFOs, shrink or
# are short.
# Needs CKPT_BIN (ckpt) and CKPT_TESTS_BIN (ckpt_shard_patch).
set -u
export LC_ALL=C

ckpt="${CKPT_BIN:-}/ckpt"
patch="${CKPT_TESTS_BIN:-}/ckpt_shard_patch"
[ -x "$ckpt" ] || { echo "SKIP: no ckpt binary (set CKPT_BIN)"; exit 77; }
[ -x "$patch" ] || { echo "SKIP: no ckpt_shard_patch (set CKPT_TESTS_BIN)"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-test-hostile-cli-XXXXXX")
trap '[ -n "${CKPT_TEST_KEEP:-}" ] || rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

# run EXPECTED_RC LABEL CMD...: runs CMD, output in $tmp/last.out
run() {
	local want=$1 label=$2
	shift 2
	"$@" > "$tmp/last.out" 2>&1
	local rc=$?
	if [ "$rc" -eq "$want" ]; then
		ok "$label (exit $rc)"
	else
		fail "$label: exit $rc, expected $want"
		sed 's/^/    /' "$tmp/last.out"
	fi
}

# shrink_while_held WHAT PID FILE OUT VERSION: once process PID (ckpt WHAT,
# stopped at its fault point with the file's size known) holds FILE open or
# mapped, FILE shrinks; the tool must refuse it naming why (OUT), not die of
# a signal, and leave no VERSION of job hj in $tmp/r9.
shrink_while_held() {
	local what=$1 pid=$2 file=$3 out=$4 version=$5 seen= rc
	for _ in $(seq 200); do
		for l in /proc/$pid/fd/*; do [ "$(readlink "$l" 2>/dev/null)" = "$file" ] && seen=1; done
		grep -qF "$file" "/proc/$pid/maps" 2>/dev/null && seen=1 # mapped, not open
		[ -n "$seen" ] && break
		sleep 0.05
	done
	[ -n "$seen" ] || fail "$what never opened or mapped the input file"
	truncate -s 4096 "$file"
	wait "$pid"
	rc=$?
	if [ "$rc" -ge 128 ]; then fail "$what died by signal $((rc - 128)) when its input shrank"
	elif [ "$rc" -ne 0 ] && grep -q "shrank" "$out"; then ok "$what of a shrinking file refused (exit $rc)"
	else fail "$what of a shrinking file: exit $rc: $(cat "$out")"; fi
	"$ckpt" ls --root "$tmp/r9" --job hj 2>/dev/null | grep -q "^ *$version " &&
		fail "$what made version $version of a shrinking file"
}

# A listing of everything under DIR, to see what a command created.
snapshot() { (cd "$1" && find . | LC_ALL=C sort); }

# restore_jailed LABEL WANT_RC ROOT [ARGS...]: restores into a fresh
# $tmp/jail/out and checks that nothing appeared in the jail beside out, and
# no file named like the hostile name anywhere under $tmp.
restore_jailed() {
	local label=$1 want=$2 root=$3
	shift 3
	rm -rf "$tmp/jail"
	mkdir -p "$tmp/jail"
	local before
	before=$(snapshot "$tmp")
	run "$want" "$label" "$ckpt" restore --root "$root" --job hj --out "$tmp/jail/out" "$@"
	local extra
	extra=$( (cd "$tmp/jail" && find . -mindepth 1 -not -path './out' -not -path './out/*') )
	[ -z "$extra" ] || fail "$label: restore wrote outside --out: $extra"
	# With several ranks, ranks restored before the failing one stay (see
	# the fallback check at the end); with one, a failure leaves nothing.
	if [ -d "$tmp/jail/out" ] && [ "$want" -ne 0 ] && [ "$one_rank" = 1 ]; then
		local inside
		inside=$(cd "$tmp/jail/out" && find . -mindepth 1 -type f)
		[ -z "$inside" ] || fail "$label: failed restore left files in --out: $inside"
	fi
	local new
	new=$(comm -13 <(echo "$before") <(snapshot "$tmp") | grep -v -e '^\./jail' -e '^\./last.out$' \
		-e '/index/' -e '/index$')
	[ -z "$new" ] || fail "$label: new files outside --out: $new"
	[ -z "$(find "$tmp" -name 'evil*' -not -path "$tmp/in/*")" ] || \
		fail "$label: a file named evil appeared: $(find "$tmp" -name 'evil*' -not -path "$tmp/in/*")"
}

mkdir -p "$tmp/in"
head -c 100000 /dev/urandom > "$tmp/in/model.bin"
printf 'notes\n' > "$tmp/in/notes.txt"
printf 'old\n' > "$tmp/in/old.txt"
save() { "$ckpt" save --root "$1" --job hj --chunk-bytes 64K "${@:2}" > /dev/null || fail "save $*"; }
shard() { printf '%s/jobs/hj/v%020d/r%06d.ckpt' "$1" "$2" "$3"; }

for name in "../evil" ".." "." "sub/evil" "/evil-abs" 'evil\x'; do
	echo "--- region name '$name'"
	one_rank=1
	# 1: patched in place, index untouched.
	r="$tmp/r1"
	rm -rf "$r"
	save "$r" --version 1 "$tmp/in/old.txt"
	save "$r" --version 2 "$tmp/in/model.bin" "$tmp/in/notes.txt"
	"$patch" rename-region "$(shard "$r" 2 0)" notes.txt "$name" || fail "patch to '$name'"
	run 3 "verify, index untouched" "$ckpt" verify --root "$r" --job hj --version 2
	grep -q -e "unsafe name" -e "differs from the one the index recorded" "$tmp/last.out" || \
		fail "verify gives no reason: $(cat "$tmp/last.out")"
	run 3 "show, index untouched" "$ckpt" show --root "$r" --job hj --version 2
	restore_jailed "restore v2, index untouched" 3 "$r" --version 2
	# 'latest' falls back to version 1, which is intact.
	restore_jailed "restore latest, index untouched" 0 "$r"
	[ -f "$tmp/jail/out/old.txt" ] || fail "restore latest did not fall back to version 1"

	# 2: reindexed from the files: the hostile one is refused, so version 2
	# is gone from the index and restore finds version 1.
	run 3 "reindex refuses the file" "$ckpt" reindex --root "$r"
	run 4 "verify v2 after reindex (no such version)" "$ckpt" verify --root "$r" --job hj --version 2
	restore_jailed "restore v2 after reindex" 4 "$r" --version 2
	restore_jailed "restore latest after reindex" 0 "$r"

	# 3: two ranks, rank 1 hostile, reindexed: the version stays PENDING.
	one_rank=0
	r="$tmp/r3"
	rm -rf "$r"
	save "$r" --version 5 --rank 0 --world-size 2 "$tmp/in/notes.txt"
	save "$r" --version 5 --rank 1 --world-size 2 "$tmp/in/notes.txt"
	"$patch" rename-region "$(shard "$r" 5 1)" notes.txt "$name" || fail "patch to '$name'"
	run 3 "verify two ranks, index untouched" "$ckpt" verify --root "$r" --job hj
	restore_jailed "restore two ranks, index untouched" 3 "$r" --version 5
	run 3 "reindex two ranks" "$ckpt" reindex --root "$r"
	"$ckpt" ls --root "$r" --job hj --json > "$tmp/ls.json"
	grep -q '"state": "PENDING"' "$tmp/ls.json" || fail "version 5 not PENDING after reindex: $(cat "$tmp/ls.json")"
	run 3 "verify two ranks after reindex" "$ckpt" verify --root "$r" --job hj --version 5
	restore_jailed "restore two ranks after reindex" 4 "$r" --version 5
done

echo "--- region named like another region's temporary file"
# restore writes region R to '.R.partial' first and renames it at the end;
# a region actually named '.x.partial', listed before 'x', is renamed over
# x's temporary file. Made by plain `ckpt save`, no patching.
r="$tmp/r4"
mkdir -p "$tmp/in4"
printf 'AAAA\n' > "$tmp/in4/.x.partial"
printf 'BBBBBBBB\n' > "$tmp/in4/x"
save "$r" --version 1 "$tmp/in4/.x.partial" "$tmp/in4/x"
rm -rf "$tmp/out4"
"$ckpt" restore --root "$r" --job hj --out "$tmp/out4" > "$tmp/last.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
	if cmp -s "$tmp/in4/x" "$tmp/out4/x" && cmp -s "$tmp/in4/.x.partial" "$tmp/out4/.x.partial"; then
		ok "regions 'x' and '.x.partial' restored intact"
	else
		fail "restore exited 0 but regions 'x'/'.x.partial' came out wrong:" \
			"x holds '$(cat "$tmp/out4/x" 2>&1)', .x.partial $( [ -e "$tmp/out4/.x.partial" ] && echo exists || echo missing)"
	fi
else
	ok "restore refused colliding region names (exit $rc)"
fi

echo "--- 'latest' falling back past a damaged multi-rank version"
# Version 5 (regions a.txt, b.txt on both ranks) has bit rot in rank 1;
# restore of 'latest' writes rank 0 of version 5, fails on rank 1, falls back
# to version 4 (a.txt only) into the same --out. The result must be version
# 4 alone: no b.txt of version 5 left beside it.
r="$tmp/r6"
printf 'a4\n' > "$tmp/in/a.txt"
for rank in 0 1; do save "$r" --version 4 --rank $rank --world-size 2 "$tmp/in/a.txt"; done
printf 'a5\n' > "$tmp/in/a.txt"
printf 'b5\n' > "$tmp/in/b.txt"
for rank in 0 1; do save "$r" --version 5 --rank $rank --world-size 2 "$tmp/in/a.txt" "$tmp/in/b.txt"; done
printf 'X' | dd of="$(shard "$r" 5 1)" bs=1 seek=4096 conv=notrunc status=none
run 3 "verify finds the bit rot" "$ckpt" verify --root "$r" --job hj --version 5
rm -rf "$tmp/out6"
"$ckpt" restore --root "$r" --job hj --out "$tmp/out6" > "$tmp/last.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
	ok "restore latest refused (exit $rc)"
elif grep -q "version 4" "$tmp/last.out" && [ ! -e "$tmp/out6/rank-0/b.txt" ] && \
     [ "$(cat "$tmp/out6/rank-0/a.txt")" = a4 ]; then
	ok "restore latest fell back to version 4 cleanly"
else
	fail "restore latest exited 0 but --out mixes versions: $(cd "$tmp/out6" && \
		for f in */*; do printf '%s=%s ' "$f" "$(cat "$f")"; done)"
fi

echo "--- region whose byte count wraps the chunk count"
one_rank=1
# A region claiming 2^64-1 bytes needs (2^64-1 + chunk - 1) / chunk chunks,
# which wraps to 0: a footer with no chunks for it passes the decoder.
r="$tmp/r5"
: > "$tmp/in/empty"
save "$r" --version 1 "$tmp/in/empty"
"$patch" region-bytes "$(shard "$r" 1 0)" empty 18446744073709551615 || fail "patch region bytes"
run 3 "verify, index untouched" "$ckpt" verify --root "$r" --job hj
restore_jailed "restore, index untouched" 3 "$r" --version 1
run 3 "reindex refuses the file" "$ckpt" reindex --root "$r"
run 4 "verify after reindex (no such version)" "$ckpt" verify --root "$r" --job hj --version 1
restore_jailed "restore after reindex" 4 "$r" --version 1

echo "--- region names a terminal would act on, and names that are not UTF-8"
# Output escapes what a file says: no escape sequence reaches the terminal,
# a newline cannot forge a line, and --json stays valid UTF-8 JSON. ckpt
# save refuses to write such names in the first place (docs/format.md 4.2).
r="$tmp/r7"
printf 'x\n' > "$tmp/in/a.txt"
printf 'y\n' > "$tmp/in/b.txt"
save "$r" --version 1 "$tmp/in/a.txt" "$tmp/in/b.txt"
"$patch" rename-region "$(shard "$r" 1 0)" a.txt $'\e]2;owned\a\e[2J\nversion 1 rank 0: ok' || fail "patch escape name"
"$patch" rename-region "$(shard "$r" 1 0)" b.txt $'\xff\xfe\xc0\xafname' || fail "patch non-UTF-8 name"
"$ckpt" reindex --root "$r" > /dev/null 2>&1
"$ckpt" show --root "$r" --job hj --version 1 > "$tmp/show.out" 2>&1
if LC_ALL=C grep -q $'\e' "$tmp/show.out" || grep -q '^version 1 rank 0: ok' "$tmp/show.out"; then
	fail "show printed a region name raw: $(od -c "$tmp/show.out" | head -5)"
else
	ok "show escapes region names"
fi
[ "$(wc -l < "$tmp/show.out")" -eq 4 ] || fail "show: a name added lines: $(cat -v "$tmp/show.out")"
"$ckpt" show --root "$r" --job hj --version 1 --json > "$tmp/show.json" 2>&1
if python3 -c 'import json,sys; d=json.loads(open(sys.argv[1],"rb").read().decode("utf-8")); n=[g["name"] for g in d["shards"][0]["regions"]]; assert "\x1b]2;owned\x07\x1b[2J\nversion 1 rank 0: ok" in n, n; assert any(x.endswith("name") and "\ufffd" in x for x in n), n' "$tmp/show.json"; then
	ok "show --json: valid UTF-8 JSON, controls escaped, bad bytes replaced"
else
	fail "show --json is not valid UTF-8 JSON: $(od -c "$tmp/show.json" | head -5)"
fi
"$ckpt" verify --root "$r" --job hj --version 1 > "$tmp/verify.out" 2>&1
LC_ALL=C grep -q $'\e' "$tmp/verify.out" && fail "verify printed a raw escape"
mkdir -p "$tmp/in8"
v=0
for bad in $'bad\nname' $'bell\a' $'\xff.bin' $'csi\xc2\x9b2J'; do
	v=$((v + 1))
	printf 'z\n' > "$tmp/in8/$bad"
	if "$ckpt" save --root "$tmp/r8" --job hj --version $v "$tmp/in8/$bad" > "$tmp/save.out" 2>&1; then
		fail "save accepted the region name $(printf '%q' "$bad")"
	elif grep -q "UTF-8" "$tmp/save.out"; then
		ok "save refuses the region name $(printf '%q' "$bad")"
	else
		fail "save refused $(printf '%q' "$bad") without saying why: $(cat -v "$tmp/save.out")"
	fi
	rm -f "$tmp/in8/$bad"
done
printf 'u\n' > "$tmp/in8/模型-ü.bin"
"$ckpt" save --root "$tmp/r8" --job hj --version 10 "$tmp/in8/模型-ü.bin" > "$tmp/save.out" 2>&1 && \
	ok "save takes a UTF-8 region name" || fail "save refused a UTF-8 name: $(cat "$tmp/save.out")"

echo "--- a header claiming 2^32-1 ranks"
# reindex takes it (a PENDING version of one shard); show and verify walk
# the ranks that have files, not four billion of them.
r="$tmp/r10"
save "$r" --version 1 "$tmp/in/notes.txt"
"$patch" world-size "$(shard "$r" 1 0)" 4294967295 || fail "patch world size"
run 0 "reindex of a 2^32-1-rank header" "$ckpt" reindex --root "$r"
run 0 "show of a 2^32-1-rank version" timeout 60 "$ckpt" show --root "$r" --job hj --version 1
[ "$(wc -l < "$tmp/last.out")" -le 20 ] || fail "show printed $(wc -l < "$tmp/last.out") lines"
run 0 "verify of a 2^32-1-rank version" timeout 60 "$ckpt" verify --root "$r" --job hj --version 1
"$ckpt" show --root "$r" --job hj --version 1 --json | python3 -c 'import json,sys; json.load(sys.stdin)' || \
	fail "show --json of a 2^32-1-rank version is not JSON"

echo "--- save inputs that are not plain, stable files"
# A FIFO would block the save forever; a file that shrinks while it is read
# once killed the tool with SIGBUS (mmap). Both are errors naming the file.
mkdir -p "$tmp/in9"
mkfifo "$tmp/in9/fifo"
timeout 20 "$ckpt" save --root "$tmp/r9" --job hj --version 1 "$tmp/in9/fifo" > "$tmp/save.out" 2>&1
rc=$?
if [ "$rc" -eq 124 ]; then fail "save of a FIFO hangs"
elif [ "$rc" -ne 0 ] && grep -q "not a regular file" "$tmp/save.out"; then ok "save refuses a FIFO (exit $rc)"
else fail "save of a FIFO: exit $rc: $(cat "$tmp/save.out")"; fi
timeout 20 "$ckpt" import --format safetensors "$tmp/in9/fifo" --root "$tmp/r9" --job hj --version 3 \
	> "$tmp/import.out" 2>&1
rc=$?
if [ "$rc" -eq 124 ]; then fail "import of a FIFO hangs"
elif [ "$rc" -ne 0 ] && grep -q "not a regular file" "$tmp/import.out"; then ok "import refuses a FIFO (exit $rc)"
else fail "import of a FIFO: exit $rc: $(cat "$tmp/import.out")"; fi
head -c 8M /dev/urandom > "$tmp/in9/shrinks.bin"
CKPT_FAULT=cli.save_read=delay:3000 "$ckpt" save --root "$tmp/r9" --job hj --version 2 "$tmp/in9/shrinks.bin" \
	> "$tmp/save.out" 2>&1 &
shrink_while_held save $! "$tmp/in9/shrinks.bin" "$tmp/save.out" 2

# The same for import, which once mapped its input: a safetensors file
# truncated while the tool holds it (its header checked, its size taken).
if command -v python3 >/dev/null; then
	python3 -c '
import json, struct, sys
n = 8 << 20
h = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + bytes(range(256)) * (n // 256))
' "$tmp/in9/shrinks.safetensors"
	CKPT_FAULT=cli.import_read=delay:3000 "$ckpt" import --format safetensors "$tmp/in9/shrinks.safetensors" \
		--root "$tmp/r9" --job hj --version 4 > "$tmp/import.out" 2>&1 &
	shrink_while_held import $! "$tmp/in9/shrinks.safetensors" "$tmp/import.out" 4
	# Short input: the header promises more bytes than the file holds.
	python3 -c '
import json, struct, sys
h = json.dumps({"w": {"dtype": "U8", "shape": [4096], "data_offsets": [0, 4096]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"x" * 100)
' "$tmp/in9/short.safetensors"
	"$ckpt" import --format safetensors "$tmp/in9/short.safetensors" --root "$tmp/r9" --job hj --version 5 \
		> "$tmp/import.out" 2>&1
	rc=$?
	if [ "$rc" -eq 3 ]; then ok "import of a short file refused (exit 3): $(head -c 200 "$tmp/import.out")"
	else fail "import of a short file: exit $rc (want 3): $(cat "$tmp/import.out")"; fi
else
	echo "skip: import of a shrinking file (no python3 to write one)"
fi

if [ "$fails" -ne 0 ]; then
	echo "$fails checks failed"
	exit 1
fi
echo "all checks passed"
