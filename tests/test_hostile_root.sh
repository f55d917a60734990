#!/bin/bash
# A tampered checkpoint root or --out must not send a deletion or a write
# anywhere else (docs/format.md section 1; issue: deletion followed symlinks).
# A victim directory outside the root, full of files named like shards, must
# come out of every step untouched:
#  - ckpt rm / gc with the version directory replaced by a symlink to it, or
#    with jobs/<job> or jobs/ a symlink to a tree that holds it;
#  - ckpt save with jobs/ or the version directory a symlink;
#  - ckpt restore --out with --out/rank-N a symlink to it.
# And a stray directory in a version directory does not wedge gc: the
# version is deleted (its record gone), the stray entry is left and logged,
# and the next gc of the job runs.
# Needs CKPT_BIN (ckpt).
set -u
export LC_ALL=C

ckpt="${CKPT_BIN:-}/ckpt"
[ -x "$ckpt" ] || { echo "SKIP: no ckpt binary (set CKPT_BIN)"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-test-hostile-root-XXXXXX")
trap '[ -n "${CKPT_TEST_KEEP:-}" ] || rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

head -c 200000 /dev/urandom > "$tmp/model.bin"
printf 'cfg\n' > "$tmp/cfg.txt"
vdir() { printf '%s/jobs/%s/v%020d' "$1" "$2" "$3"; }

# A victim tree shaped like a root: jobs/j/v..1/r000000.ckpt and friends.
make_victim() {
	rm -rf "$tmp/victim"
	mkdir -p "$(vdir "$tmp/victim" j 1)"
	for f in r000000.ckpt .r000001.ckpt.tmp COMMITTED precious.txt; do
		echo "keep $f" > "$(vdir "$tmp/victim" j 1)/$f"
	done
	echo keep > "$tmp/victim/top.txt"
	victim_list=$(cd "$tmp/victim" && find . | sort)
}
victim_intact() {
	local now
	now=$(cd "$tmp/victim" 2>/dev/null && find . | sort)
	if [ "$now" = "$victim_list" ] && grep -q "keep r000000.ckpt" "$(vdir "$tmp/victim" j 1)/r000000.ckpt"; then
		ok "$1: victim intact"
	else
		fail "$1: the victim outside the root changed"
		diff <(echo "$victim_list") <(echo "$now") | sed 's/^/    /'
	fi
}
save() { "$ckpt" save --root "$1" --job j --version "$2" "$tmp/model.bin" "$tmp/cfg.txt" > "$tmp/save.out" 2>&1; }

# --- rm / gc with the version directory replaced by a symlink
make_victim
r="$tmp/r1"
save "$r" 1 || fail "save r1 v1"
save "$r" 2 || fail "save r1 v2"
rm -rf "$(vdir "$r" j 1)"
ln -s "$(vdir "$tmp/victim" j 1)" "$(vdir "$r" j 1)"
"$ckpt" rm --root "$r" --job j --version 1 > "$tmp/rm.out" 2>&1 || fail "rm on a symlinked version dir: exit $?"
victim_intact "rm, version dir a symlink"
[ ! -e "$(vdir "$r" j 1)" ] && [ ! -L "$(vdir "$r" j 1)" ] || fail "rm: the symlink itself should be gone"
"$ckpt" ls --root "$r" --job j 2>/dev/null | grep -q '^ *1 ' && fail "rm: version 1 still listed"

# --- gc with jobs/j a symlink to the victim's job directory
make_victim
r="$tmp/r2"
save "$r" 1 || fail "save r2 v1"
save "$r" 2 || fail "save r2 v2"
mv "$r/jobs/j" "$tmp/r2-real-j"
ln -s "$tmp/victim/jobs/j" "$r/jobs/j"
"$ckpt" gc --root "$r" --job j --keep 1 > "$tmp/gc.out" 2>&1 || fail "gc with a symlinked job dir: exit $?"
victim_intact "gc, job dir a symlink"
grep -q "not followed" "$tmp/gc.out" || fail "gc: the symlinked job dir was not reported"

# --- gc with jobs/ a symlink to the victim's jobs/
make_victim
r="$tmp/r3"
save "$r" 1 || fail "save r3 v1"
save "$r" 2 || fail "save r3 v2"
rm -rf "$r/jobs"
ln -s "$tmp/victim/jobs" "$r/jobs"
"$ckpt" gc --root "$r" --job j --keep 1 > "$tmp/gc.out" 2>&1 || fail "gc with a symlinked jobs/: exit $?"
victim_intact "gc, jobs/ a symlink"

# --- save through a symlinked jobs/ and a symlinked version directory
make_victim
r="$tmp/r4"
mkdir -p "$r"
ln -s "$tmp/victim/jobs" "$r/jobs"
if save "$r" 5; then fail "save through a symlinked jobs/ succeeded"; else ok "save through a symlinked jobs/ refused"; fi
victim_intact "save, jobs/ a symlink"
make_victim
r="$tmp/r5"
save "$r" 1 || fail "save r5 v1"
ln -s "$(vdir "$tmp/victim" j 1)" "$(vdir "$r" j 7)"
if save "$r" 7; then fail "save through a symlinked version dir succeeded"; else ok "save through a symlinked version dir refused"; fi
victim_intact "save, version dir a symlink"

# --- restore --out with rank-N a symlink (two ranks: one directory each)
make_victim
r="$tmp/r6"
"$ckpt" save --root "$r" --job j --version 3 --world-size 2 --rank 0 "$tmp/model.bin" > /dev/null 2>&1 || fail "save rank 0"
"$ckpt" save --root "$r" --job j --version 3 --world-size 2 --rank 1 "$tmp/cfg.txt" > /dev/null 2>&1 || fail "save rank 1"
mkdir -p "$tmp/out"
ln -s "$(vdir "$tmp/victim" j 1)" "$tmp/out/rank-1"
"$ckpt" restore --root "$r" --job j --out "$tmp/out" > "$tmp/restore.out" 2>&1
rc=$?
victim_intact "restore, --out/rank-1 a symlink"
[ ! -e "$(vdir "$tmp/victim" j 1)/cfg.txt" ] || fail "restore wrote cfg.txt through the symlink"
[ "$rc" -ne 0 ] && ok "restore into a symlinked rank directory refused (exit $rc)" || \
	fail "restore into a symlinked rank directory: exit 0"

# --- a stray directory in a version directory does not wedge gc
r="$tmp/r7"
for v in 1 2 3; do save "$r" $v || fail "save r7 v$v"; done
mkdir "$(vdir "$r" j 1)/stray-dir"
mkdir "$(vdir "$r" j 1)/r000009.ckpt"   # a directory under a shard's name
"$ckpt" gc --root "$r" --job j --keep 2 > "$tmp/gc.out" 2>&1 || { fail "gc with a stray dir: exit $?"; cat "$tmp/gc.out"; }
grep -q "stray-dir" "$tmp/gc.out" || fail "gc: the stray entry was not logged"
[ -d "$(vdir "$r" j 1)/stray-dir" ] || fail "gc removed an entry the format does not define"
[ ! -e "$(vdir "$r" j 1)/r000000.ckpt" ] || fail "gc left the shard file of a deleted version"
"$ckpt" ls --root "$r" --job j --json > "$tmp/ls.json" 2>/dev/null
grep -q '"version": 1[,}]' "$tmp/ls.json" && fail "version 1 still in the index after gc"
save "$r" 4 || fail "save r7 v4"
"$ckpt" gc --root "$r" --job j --keep 2 > "$tmp/gc2.out" 2>&1 || fail "second gc: exit $?"
[ ! -e "$(vdir "$r" j 2)" ] && ok "stray entry: gc finished, the next gc ran" || fail "second gc did not delete version 2"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
