#!/bin/bash
# The independent reader (tools/ckpt_read.py, written from docs/format.md
# alone) must read every shard file the C library writes, and give back the
# saved bytes exactly; it must also refuse damaged files and unknown format
# versions. Exit 0 pass, 1 fail, 77 skip (Python modules missing).
#
# CKPT_BIN: the build's bin directory (or the ckpt binary itself);
# default: ../build/bin next to this script's directory.
# CKPT_PYTHON: the interpreter (default /usr/bin/python3, Debian's modules).

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${CKPT_BIN:-$repo/build/bin}
if [ -d "$bin" ]; then
	ckpt=$bin/ckpt
else
	ckpt=$bin
	bin=$(dirname "$bin")
fi
py=${CKPT_PYTHON:-/usr/bin/python3}
reader=$repo/tools/ckpt_read.py

if [ ! -x "$ckpt" ]; then
	echo "FAIL: no ckpt binary at $ckpt (set CKPT_BIN)"
	exit 1
fi
if [ ! -x "$py" ] || ! "$py" -c 'import xxhash' 2>/dev/null; then
	echo "SKIP: $py with the xxhash module is needed (apt-get install python3-xxhash)"
	exit 77
fi
if ! "$py" -c 'import zstandard' 2>/dev/null && ! "$py" -c 'import zstd' 2>/dev/null; then
	echo "SKIP: the Python zstandard or zstd module is needed (apt-get install python3-zstandard)"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-indep.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
in=$tmp/in
mkdir -p "$in"
failures=0

fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

run() { # run a command quietly; on failure show its output
	local out
	if ! out=$("$@" 2>&1); then
		fail "$* :: $out"
		return 1
	fi
	return 0
}

# ---------------------------------------------------------------- inputs
# Odd sizes around the 4 KiB alignment and the 64 KiB chunk and leaf size,
# random (incompressible) and repetitive (compressible) contents.
"$py" - "$in" <<'EOF' || { echo "FAIL: cannot make inputs"; exit 1; }
import os, random, sys
d = sys.argv[1]
rnd = random.Random(1234)
def put(name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
put("empty.bin", b"")
put("one.bin", b"\x5a")
for n in (4095, 4096, 4097, 65535, 65536, 65537, 131073, 200001):
    put("rand-%d.bin" % n, bytes(rnd.getrandbits(8) for _ in range(n)))
text = b"".join(b"step %d loss %.4f lr 0.0003\n" % (i, 2.0 / (i + 1)) for i in range(40000))
put("log.txt", text[:1000003])
# half compressible, half random: some chunks compressed, some stored raw
put("mixed.bin", text[:150000] + bytes(rnd.getrandbits(8) for _ in range(150001)))
put("zeros.bin", bytes(300007))
put("rank1-state.bin", bytes(rnd.getrandbits(4) for _ in range(77777)))
EOF

# region name -> input file is 1:1 (regions are named after the files)
save() { # save VERSION [options...] -- FILES...
	local v=$1
	shift
	run "$ckpt" save --root "$root" --job indep --version "$v" "$@"
}

cd "$in" || exit 1
save 1 empty.bin one.bin rand-4095.bin rand-4096.bin rand-4097.bin log.txt
save 2 --chunk-bytes 64K one.bin rand-65535.bin rand-65536.bin rand-65537.bin rand-131073.bin \
	rand-200001.bin empty.bin
save 3 --compress --chunk-bytes 64K log.txt mixed.bin zeros.bin rand-4097.bin one.bin empty.bin
save 4 --compress --chunk-bytes 128K rand-200001.bin log.txt
save 5 --world-size 2 --rank 0 --chunk-bytes 64K log.txt rand-65537.bin
save 5 --world-size 2 --rank 1 --compress --chunk-bytes 64K rank1-state.bin zeros.bin one.bin
cd "$tmp" || exit 1

# Typed regions (f32/f64/i16: byte-shuffled before zstd) can only be made
# through the library API; build a tiny saver when a C compiler and the
# shared library are at hand.
typed=0
lib=$(cd "$bin/../lib" 2>/dev/null && pwd)
cc=${CC:-cc}
if [ -n "$lib" ] && [ -e "$lib/libckpt.so" ] && command -v "$cc" >/dev/null 2>&1; then
	mkdir -p "$tmp/typed-in"
	cat >"$tmp/gen.c" <<'EOF'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ckpt.h"

static int put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	ckpt_config cfg;
	ckpt_config_init(&cfg);
	cfg.root = argv[1];
	cfg.job_id = argv[2];
	cfg.chunk_bytes = 64 << 10;
	cfg.staging_bytes = 4 << 20;
	cfg.compress = 1;
	ckpt_ctx *ctx;
	int e = ckpt_ctx_open(&cfg, &ctx);
	if (e < 0) {
		fprintf(stderr, "open: %s\n", ckpt_strerror(e));
		return 1;
	}
	size_t nf = 50001, nd = 9000, ns = 70001, nh = 33335;
	float *f32 = malloc(nf * 4);
	double *f64 = malloc(nd * 8);
	short *i16 = malloc(ns * 2);
	unsigned short *f16 = malloc(nh * 2);
	for (size_t i = 0; i < nf; i++) f32[i] = (float)sin(i * 0.001);
	for (size_t i = 0; i < nd; i++) f64[i] = 1.0 + i * 0.5;
	for (size_t i = 0; i < ns; i++) i16[i] = (short)(i % 1000);
	for (size_t i = 0; i < nh; i++) f16[i] = (unsigned short)(0x3c00 + (i % 97));
	struct { const char *name; void *p; size_t bytes; ckpt_dtype dt; } r[] = {
		{ "layer0.weight", f32, nf * 4, CKPT_DTYPE_F32 },
		{ "optim.exp_avg", f64, nd * 8, CKPT_DTYPE_F64 },
		{ "tokens", i16, ns * 2, CKPT_DTYPE_I16 },
		/* typed but not a whole number of elements: shuffle keeps the tail */
		{ "odd-f16", f16, nh * 2 - 1, CKPT_DTYPE_F16 },
		{ "empty-f32", NULL, 0, CKPT_DTYPE_F32 },
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		ckpt_region_desc d;
		ckpt_region_desc_init(&d, r[i].name, r[i].p, r[i].bytes);
		d.dtype = r[i].dt;
		if (i == 0) { /* this rank's half of a 1-d tensor */
			d.ndim = 1;
			d.global_shape[0] = nf * 2;
			d.offsets[0] = nf;
			d.extents[0] = nf;
		} else if (i == 1) {
			d.ndim = 2;
			d.global_shape[0] = 90;
			d.global_shape[1] = 100;
			d.extents[0] = 90;
			d.extents[1] = 100;
		}
		if ((e = ckpt_region_add(ctx, &d)) < 0) {
			fprintf(stderr, "region %s: %s\n", r[i].name, ckpt_strerror(e));
			return 1;
		}
		if (put(argv[3], r[i].name, r[i].p, r[i].bytes) < 0)
			return 1;
	}
	ckpt_handle *h;
	if ((e = ckpt_save(ctx, 6, 0, &h)) < 0 ||
	    (e = ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL)) < 0) {
		fprintf(stderr, "save: %s\n", ckpt_strerror(e));
		return 1;
	}
	ckpt_handle_free(h);
	return ckpt_ctx_close(ctx) < 0;
}
EOF
	# A sanitized libckpt.so needs the sanitizer runtime in the program too.
	san=()
	if command -v ldd >/dev/null && ldd "$lib/libckpt.so" | grep libasan >/dev/null; then
		san=(-fsanitize=address,undefined)
	fi
	if "$cc" -O1 "${san[@]}" -I"$repo/libckpt/include" "$tmp/gen.c" -o "$tmp/gen" -L"$lib" -lckpt \
		-Wl,-rpath,"$lib" -lm 2>"$tmp/cc.log"; then
		# The generator keeps its buffers to the end: leak checks are for the library.
		if ASAN_OPTIONS=detect_leaks=0 "$tmp/gen" "$root" indep "$tmp/typed-in" >"$tmp/gen.log" 2>&1; then
			typed=1
		else
			fail "typed saver: $(cat "$tmp/gen.log")"
		fi
	else
		echo "note: cannot build the typed-region saver; shuffled chunks not covered"
		sed 's/^/  /' "$tmp/cc.log"
	fi
else
	echo "note: no C compiler or libckpt.so; shuffled chunks not covered"
fi

# The C tool must agree that everything is intact.
run "$ckpt" verify --root "$root" --job indep

# ---------------------------------------------------------------- read back
shards=$(cd "$root" && find jobs -name 'r*.ckpt' | sort)
nshards=0
nregions=0
shuffled=0
for rel in $shards; do
	f=$root/$rel
	nshards=$((nshards + 1))
	run "$py" "$reader" verify --strict "$f" || continue
	out=$tmp/dump/$rel
	run "$py" "$reader" dump-all --strict "$f" "$out" || continue
	# Which regions the file says it has, and whether any chunk is shuffled.
	info=$("$py" "$reader" info --json "$f") || { fail "info $rel"; continue; }
	names=$(printf '%s' "$info" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
for r in d["regions"]:
    print(r["name"])')
	if printf '%s' "$info" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(r["dtype_name"] != "bytes" and r["compressed_chunks"] for r in d["regions"]) else 1)'; then
		shuffled=$((shuffled + 1))
	fi
	for name in $names; do
		nregions=$((nregions + 1))
		if [ -e "$in/$name" ]; then
			orig=$in/$name
		elif [ -e "$tmp/typed-in/$name" ]; then
			orig=$tmp/typed-in/$name
		else
			fail "$rel: region '$name' matches no input file"
			continue
		fi
		cmp -s "$orig" "$out/$name" || fail "$rel: region '$name' differs from $name"
	done
	# The single-region path too (first region).
	first=$(printf '%s\n' "$names" | head -n 1)
	if [ -n "$first" ]; then
		run "$py" "$reader" dump "$f" "$first" "$tmp/one.out" &&
			{ cmp -s "$out/$first" "$tmp/one.out" || fail "$rel: dump of '$first' differs"; }
	fi
done
expect=6
[ "$typed" = 1 ] && expect=7
[ "$nshards" -eq "$expect" ] || fail "expected $expect shard files, found $nshards"
if [ "$typed" = 1 ] && [ "$shuffled" -eq 0 ]; then
	fail "the typed shard has no shuffled+compressed chunk"
fi
"$py" "$reader" dump "$root/jobs/indep/v00000000000000000001/r000000.ckpt" no-such-region \
	"$tmp/x" 2>/dev/null
[ $? -eq 4 ] || fail "dump of a missing region should exit 4"

# ---------------------------------------------------------------- damage
# Each damaged copy must be refused (exit 3) by the reader, and by the
# C tool as well. v3's shard (rank 0) has raw and compressed chunks.
damage() { # name python-snippet-editing-bytearray-b
	local name=$1 edit=$2
	local r2=$tmp/bad-$name
	rm -rf "$r2"
	cp -r "$root" "$r2"
	local f=$r2/jobs/indep/v00000000000000000003/r000000.ckpt
	"$py" - "$f" "$edit" <<'EOF' || { fail "cannot damage $name"; return; }
import struct, sys, xxhash
path, edit = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
def h64(x):
    return xxhash.xxh3_64_intdigest(bytes(x))
def fix_checksums():
    # make header, tail and their cross-reference consistent again
    struct.pack_into("<Q", b, 248, h64(b[0:248]))
    t = len(b) - 64
    struct.pack_into("<Q", b, t + 48, h64(b[0:248]))
    struct.pack_into("<Q", b, t + 56, h64(b[t:t + 56]))
exec(edit)
open(path, "wb").write(b)
EOF
	"$py" "$reader" verify "$f" >"$tmp/r.out" 2>&1
	local rc=$?
	[ $rc -eq 3 ] || fail "damage '$name': reader exit $rc, expected 3: $(cat "$tmp/r.out")"
	"$ckpt" verify --root "$r2" --job indep --version 3 >"$tmp/c.out" 2>&1
	rc=$?
	[ $rc -eq 3 ] || fail "damage '$name': ckpt verify exit $rc, expected 3: $(cat "$tmp/c.out")"
	rm -rf "$r2"
}
# a byte in the middle of chunk 0's stored bytes (chunks may lie in any order)
damage chunk-byte 'fo, = struct.unpack_from("<Q", b, len(b) - 48)
rt, = struct.unpack_from("<Q", b, fo + 24)
off, slen = struct.unpack_from("<QI", b, fo + 64 + rt)
b[off + slen // 2] ^= 0x01'
damage header-byte 'b[20] ^= 0x01'
damage footer-byte 'fo = struct.unpack_from("<Q", b, len(b) - 48)[0]; b[fo + 40] ^= 0x01'
damage tail-byte 'b[len(b) - 30] ^= 0x01'
damage truncated 'del b[-4096:]'
damage extended 'b += bytes(4096)'
damage format-v2 'struct.pack_into("<I", b, 8, 2); fix_checksums()'
damage checksum-algo 'struct.pack_into("<I", b, 44, 2); fix_checksums()'
# The reader must say "not supported" for an unknown version.
r2=$tmp/bad-v2msg
cp -r "$root" "$r2"
"$py" - "$r2/jobs/indep/v00000000000000000003/r000000.ckpt" <<'EOF'
import struct, sys, xxhash
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
struct.pack_into("<I", b, 8, 2)
h = xxhash.xxh3_64_intdigest(bytes(b[0:248]))
struct.pack_into("<Q", b, 248, h)
t = len(b) - 64
struct.pack_into("<Q", b, t + 48, h)
struct.pack_into("<Q", b, t + 56, xxhash.xxh3_64_intdigest(bytes(b[t:t + 56])))
open(p, "wb").write(b)
EOF
msg=$("$py" "$reader" info "$r2/jobs/indep/v00000000000000000003/r000000.ckpt" 2>&1)
case $msg in
*"not supported"*) ;;
*) fail "format version 2 not reported as unsupported: $msg" ;;
esac

if [ "$failures" -ne 0 ]; then
	echo "FAIL: $failures check(s) failed"
	exit 1
fi
echo "PASS: $nshards shard files, $nregions regions read back byte for byte" \
	"($shuffled with shuffled chunks); damaged files refused"
exit 0
