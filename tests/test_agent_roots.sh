#!/usr/bin/env bash
# The agent runs as root and deletes files under the roots ranks register;
# it must take only roots it has a reason to trust, and never follow a
# symlink below one (issue: anyone with one job's secret could have
# arbitrary directories emptied).
#  1. --rank-roots: a root outside it, or a symlink inside it that leads
#     outside, is refused at REGISTER_RANK (the save fails, nothing recorded);
#  2. as root only: a rank running as another uid (nobody) is refused a root
#     it does not own, and served in one it owns;
#  3. ckpt rm --daemon with the version directory under a registered root
#     replaced by a symlink: the victim it points to stays whole, and the
#     version still goes.
set -uo pipefail
BIN=${CKPT_BIN:?}
command -v python3 >/dev/null || exit 77
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-agent-roots-XXXXXX")
pid=
stop() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	pid=
}
cleanup() { stop; [ -n "${CKPT_TEST_KEEP:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
j() { python3 -c 'import json,sys; d=json.load(sys.stdin); exec(sys.argv[1])' "$1"; }

chmod 755 "$tmp"
head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"
sock=$tmp/ckptd.sock
mkdir -p "$tmp/droot" "$tmp/allowed/root" "$tmp/outside"
ln -s "$tmp/outside" "$tmp/allowed/sneaky"
export CKPT_TOKEN_FILE=$tmp/token
unset CKPT_TOKEN CKPT_DAEMON

"$BIN/ckptd" --role both --socket "$sock" --root "$tmp/droot" --node n0 --pool-size 64M --job-pool-size 16M \
	--retention-interval 0 --rank-roots "$tmp/allowed" >>"$tmp/ckptd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[ -S "$sock" ] && break
	kill -0 "$pid" 2>/dev/null || { echo "FAIL: ckptd exited"; cat "$tmp/ckptd.log"; exit 1; }
	sleep 0.1
done
[ -S "$sock" ] || { echo "FAIL: ckptd did not come up"; exit 1; }
head -c 100000 /dev/urandom >"$tmp/w.bin"
save() { "$BIN/ckpt" save --daemon "unix:$sock" --root "$1" --job "$2" --version "$3" "$tmp/w.bin" >"$tmp/save.out" 2>&1; }

# --- 1. outside --rank-roots
if save "$tmp/outside" jo 1; then fail "a root outside --rank-roots was taken"; else ok "root outside --rank-roots refused"; fi
grep -q "outside the agent's --rank-roots" "$tmp/ckptd.log" || fail "the refusal is not in the daemon log"
if save "$tmp/allowed/sneaky" js 1; then fail "a symlink out of --rank-roots was taken"; else ok "symlink leading outside --rank-roots refused"; fi
save "$tmp/allowed/root" jr 1 || { fail "a root inside --rank-roots was refused"; cat "$tmp/save.out"; }

# --- 2. ownership, checked against the rank's uid (needs root to switch uid)
# The rank runs as uid nobody, so nobody must be able to reach everything it
# uses: the build tree may sit under a directory only root can enter (a
# checkout in /root, a mktemp -d), so the program is copied into the test's
# folder first, and that folder must be reachable itself (TMPDIR could be
# private too: then the part is skipped, with the reason, and the test exits
# 77). Each case then tells "refused by the agent" (the agent logs the
# refusal of uid 65534, the tool says so and exits 1) from "did not run".
skip_part2=""
if [ "$(id -u)" = 0 ]; then
	chmod 666 "$sock"
	install -m 600 -o nobody "$tmp/token" "$tmp/token.nobody"
	mkdir -m 777 "$tmp/allowed/roots-root"
	mkdir "$tmp/allowed/roots-nobody" && chown nobody "$tmp/allowed/roots-nobody"
	cp "$tmp/w.bin" "$tmp/w-nobody.bin" && chmod 644 "$tmp/w-nobody.bin"
	mkdir -m 755 "$tmp/bin-nobody" && install -m 755 "$BIN/ckpt" "$tmp/bin-nobody/ckpt"
	# Through env: setpriv itself still holds root's capabilities when it
	# execs its command (a 0700 root file runs), env and what it runs do not.
	nob() { setpriv --reuid=65534 --regid=65534 --clear-groups env "$@"; }
	if ! nob test -x "$tmp" -a -r "$tmp/w-nobody.bin"; then
		skip_part2="uid nobody cannot enter $tmp (a directory above it is private: set TMPDIR to one it can reach)"
	elif ! nob "$tmp/bin-nobody/ckpt" --help >"$tmp/probe.out" 2>&1; then
		fail "uid nobody cannot run a copy of ckpt in $tmp: $(head -c 300 "$tmp/probe.out")"
	else
		as_nobody() { # root version: exit status of ckpt save run as nobody
			nob CKPT_TOKEN_FILE="$tmp/token.nobody" "$tmp/bin-nobody/ckpt" save --daemon "unix:$sock" \
				--root "$1" --job jn --version "$2" "$tmp/w-nobody.bin" >"$tmp/save.out" 2>&1
		}
		as_nobody "$tmp/allowed/roots-root" 1
		rc=$?
		if [ "$rc" = 0 ]; then
			fail "uid nobody was given a root owned by uid 0"
		elif [ "$rc" -ge 126 ]; then
			fail "ckpt did not run as nobody (exit $rc): $(head -c 300 "$tmp/save.out")"
		elif ! grep -qF "uid=65534 job=jn]: rank 0 refused: checkpoint root $tmp/allowed/roots-root is owned by uid 0, not by the rank's uid 65534" "$tmp/ckptd.log"; then
			fail "ckpt save as nobody failed (exit $rc), but not because the agent refused the root: $(head -c 300 "$tmp/save.out")"
		else
			ok "a root the rank's uid does not own refused by the agent (exit $rc)"
		fi
		if as_nobody "$tmp/allowed/roots-nobody" 2; then
			[ -e "$tmp/allowed/roots-nobody/jobs/jn/v$(printf %020d 2)/r000000.ckpt" ] &&
				ok "uid nobody served in its own root" || fail "uid nobody's save returned 0 but left no shard"
		else
			fail "uid nobody refused its own root (exit $?)"; cat "$tmp/save.out"
		fi
	fi
else
	skip_part2="the ownership check needs root to run a rank as another uid"
fi
[ -z "$skip_part2" ] || echo "skip: $skip_part2"

# --- 3. deletion through the agent does not follow a symlinked version directory
save "$tmp/allowed/root" jr 2 || fail "save jr 2"
vdir() { printf '%s/jobs/jr/v%020d' "$1" "$2"; }
mkdir -p "$tmp/victim"
for f in r000000.ckpt .r000001.ckpt.tmp COMMITTED precious.txt; do echo "keep $f" >"$tmp/victim/$f"; done
rm -rf "$(vdir "$tmp/allowed/root" 1)"
ln -s "$tmp/victim" "$(vdir "$tmp/allowed/root" 1)"
"$BIN/ckpt" rm --daemon "unix:$sock" --job jr --version 1 >"$tmp/rm.out" 2>&1 || fail "rm --daemon: $(cat "$tmp/rm.out")"
gone=
for _ in $(seq 100); do
	v=$("$BIN/ckpt" ls --daemon "unix:$sock" --job jr --json | j 'print(" ".join(str(x["version"]) for x in d))')
	[ "$v" = "2" ] && { gone=1; break; }
	sleep 0.1
done
[ -n "$gone" ] || fail "version 1 not deleted through the daemon (listed: $v)"
for _ in $(seq 50); do [ -L "$(vdir "$tmp/allowed/root" 1)" ] || break; sleep 0.1; done
n=$(ls -A "$tmp/victim" | wc -l)
[ "$n" = 4 ] && ok "rm --daemon: the victim behind a symlinked version directory is whole" ||
	fail "rm --daemon emptied the victim ($n of 4 files left)"
[ -e "$(vdir "$tmp/allowed/root" 2)/r000000.ckpt" ] || fail "version 2 lost"

stop
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; tail -n 30 "$tmp/ckptd.log"; exit 1; }
# A part that could not run here is a skip, not a pass.
[ -z "$skip_part2" ] || { echo "SKIP (part 2): $skip_part2"; exit 77; }
echo "all passed"
