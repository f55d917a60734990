#!/usr/bin/python3
"""ckpt_read.py: an independent reader of ckpt shard files (format version 1).

Written from docs/format.md alone, to show that the specification is precise
enough to build a reader without the C code. It checks the tail, the header,
the footer and (for verify/dump) every chunk, in the order the specification
lists its validation rules.

usage:
  ckpt_read.py info   [--json] [--strict] FILE
  ckpt_read.py verify [--json] [--strict] FILE
  ckpt_read.py dump   [--strict] FILE REGION OUT      (OUT '-' = stdout)
  ckpt_read.py dump-all [--strict] FILE DIR

--strict adds checks of what the writer guarantees but the format does not
require (reserved bytes zero, chunks packed without overlap, ...).

exit codes: 0 ok, 1 error (I/O, missing Python module), 2 usage,
            3 invalid, corrupt or unsupported file, 4 no such region.

Needs the Python modules xxhash (python3-xxhash) and, for compressed chunks,
zstandard (python3-zstandard) or zstd (python3-zstd).
"""

import json
import os
import struct
import sys

try:
    import xxhash
except ImportError:  # reported when the tool runs
    xxhash = None

try:
    import zstandard
except ImportError:
    zstandard = None
    try:
        import zstd as zstd_simple
    except ImportError:
        zstd_simple = None

FORMAT_VERSION = 1          # newest shard format this reader knows
HEADER_LEN = 4096
HEADER_USED = 256
TAIL_LEN = 64
FOOTER_FIXED = 64
REGION_FIXED = 32
CHUNK_ENTRY = 32
ALIGN = 4096
MAX_FOOTER = 1 << 30
MAX_REGIONS = 1 << 20
MIN_CHUNK = 64 << 10
MAX_CHUNK = 256 << 20
MAX_DIMS = 8
MAX_NAME = 255
CSUM_XXH3_TREE = 1
LEAF = 65536
FLAG_ZSTD = 0x1
KNOWN_FLAGS = FLAG_ZSTD | (0xff << 8)

DTYPES = [  # (name, size) by code
    ("bytes", 1), ("u8", 1), ("i8", 1), ("i16", 2), ("u16", 2), ("i32", 4),
    ("u32", 4), ("i64", 8), ("u64", 8), ("f16", 2), ("bf16", 2), ("f32", 4),
    ("f64", 8), ("f8e4m3", 1), ("f8e5m2", 1), ("bool", 1),
]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CORRUPT, EXIT_NOTFOUND = 0, 1, 2, 3, 4
U64_MAX = (1 << 64) - 1


class Invalid(Exception):
    """The file breaks a rule of the format (or is a version we cannot read)."""

    def __init__(self, msg, unsupported=False):
        super().__init__(msg)
        self.unsupported = unsupported


def align_up(x, a):
    return (x + a - 1) // a * a


def h64(data):
    return xxhash.xxh3_64_intdigest(data)


def tree_checksum(data):
    """xxh3-tree-64k: XXH3-64 of each 64 KiB leaf, then XXH3-64 seeded with
    the length over the little-endian leaf hashes."""
    n = len(data)
    mv = memoryview(data)
    leaves = bytearray()
    for off in range(0, n, LEAF):
        leaves += struct.pack("<Q", xxhash.xxh3_64_intdigest(mv[off:off + LEAF]))
    return xxhash.xxh3_64_intdigest(bytes(leaves), seed=n)


def unshuffle(buf, e):
    """Inverse of the byte shuffle with element size e (> 1)."""
    n = len(buf) // e
    out = bytearray(len(buf))
    for k in range(e):
        out[k:n * e:e] = buf[k * n:(k + 1) * n]
    out[n * e:] = buf[n * e:]
    return bytes(out)


def zstd_decode(data, raw_len):
    """Decodes exactly one zstd frame that must give raw_len bytes."""
    if zstandard is not None:
        fcs = zstandard.frame_content_size(data)
        if fcs >= 0 and fcs != raw_len:
            raise Invalid("zstd frame declares %d bytes, chunk holds %d" % (fcs, raw_len))
        dctx = zstandard.ZstdDecompressor()
        if fcs < 0:
            # No declared size: bound the output before decoding for real.
            dctx.decompress(data, max_output_size=raw_len)
        obj = dctx.decompressobj()
        out = obj.decompress(data)
        if not obj.eof:
            raise Invalid("zstd frame is incomplete")
        if obj.unused_data:
            raise Invalid("%d bytes follow the zstd frame" % len(obj.unused_data))
        return out
    if zstd_simple is not None:
        return zstd_simple.decompress(data)
    raise RuntimeError("a compressed chunk needs the Python module zstandard "
                       "(apt-get install python3-zstandard) or zstd")


def job_valid(job):
    if not 1 <= len(job) <= 64 or job[:1] == b".":
        return False
    ok = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
    return all(c in ok for c in job)


def name_valid(name):
    if not 1 <= len(name) <= MAX_NAME or name in (b".", b".."):
        return False
    return not any(c in b"/\\\x00" for c in name)


def show(b):
    return b.decode("utf-8", "backslashreplace")


class Shard:
    """A shard file, opened and structurally validated (rules 1-29)."""

    def __init__(self, path, strict=False):
        self.path = path
        self.strict = strict
        self.f = open(path, "rb")
        try:
            self._parse()
        except BaseException:
            self.f.close()
            raise

    def close(self):
        self.f.close()

    def _read(self, off, n):
        self.f.seek(off)
        b = self.f.read(n)
        if len(b) != n:
            raise OSError("short read at offset %d" % off)
        return b

    # -------------------------------------------------------------- parse
    def _parse(self):
        self.file_length = os.fstat(self.f.fileno()).st_size
        if self.file_length < HEADER_LEN + TAIL_LEN:
            raise Invalid("file too short (%d bytes)" % self.file_length)
        hdr = self._read(0, HEADER_USED)
        tail = self._read(self.file_length - TAIL_LEN, TAIL_LEN)
        self._parse_tail(tail)
        self._parse_header(hdr)
        if self.header_checksum != self.tail["header_checksum"]:
            raise Invalid("header and tail disagree (header checksum)")
        footer = self._read(self.tail["footer_offset"], self.tail["footer_length"])
        if h64(footer) != self.tail["footer_checksum"]:
            raise Invalid("footer checksum mismatch")
        self._parse_footer(footer)
        if self.strict:
            self._strict_checks(footer)

    def _parse_tail(self, t):
        if t[0:8] != b"CKPTTAIL":
            raise Invalid("no tail at end of file (truncated or not finished)")
        if struct.unpack_from("<Q", t, 56)[0] != h64(t[0:56]):
            raise Invalid("tail checksum mismatch")
        fv, tl = struct.unpack_from("<II", t, 8)
        if not 1 <= fv <= FORMAT_VERSION:
            raise Invalid("tail: format version %d not supported" % fv, unsupported=True)
        if tl != TAIL_LEN:
            raise Invalid("tail length field is %d" % tl)
        fo, fl, fsum, flen, hsum = struct.unpack_from("<QQQQQ", t, 16)
        self.tail = dict(format_version=fv, footer_offset=fo, footer_length=fl,
                         footer_checksum=fsum, file_length=flen, header_checksum=hsum)
        if flen != self.file_length:
            raise Invalid("file is %d bytes, tail says %d (truncated or extended)"
                          % (self.file_length, flen))
        L = self.file_length
        if (fo < HEADER_LEN or fo % ALIGN or fl < FOOTER_FIXED or fl > MAX_FOOTER
                or fo > L or fl > L - fo or L - fo - fl < TAIL_LEN):
            raise Invalid("footer location (offset %d, length %d) outside the file" % (fo, fl))

    def _parse_header(self, h):
        if h[0:8] != b"CKPTSHRD":
            raise Invalid("not a ckpt shard file (bad header magic)")
        self.header_checksum = struct.unpack_from("<Q", h, 248)[0]
        if self.header_checksum != h64(h[0:248]):
            raise Invalid("header checksum mismatch")
        fv, hl = struct.unpack_from("<II", h, 8)
        if not 1 <= fv <= FORMAT_VERSION:
            raise Invalid("format version %d not supported (this reader knows up to %d)"
                          % (fv, FORMAT_VERSION), unsupported=True)
        if hl != HEADER_LEN:
            raise Invalid("header length %d, expected %d" % (hl, HEADER_LEN))
        version, rank, world, created, align, algo = struct.unpack_from("<QIIQII", h, 16)
        job_len, = struct.unpack_from("<I", h, 176)
        lineage, = struct.unpack_from("<Q", h, 184)
        if world == 0 or rank >= world:
            raise Invalid("rank %d not below world size %d" % (rank, world))
        if align != ALIGN:
            raise Invalid("chunk alignment %d not supported" % align, unsupported=True)
        if algo != CSUM_XXH3_TREE:
            raise Invalid("checksum algorithm %d not supported" % algo, unsupported=True)
        if not 1 <= job_len <= 64:
            raise Invalid("job id length %d out of range" % job_len)
        job = h[48:48 + job_len]
        if not job_valid(job):
            raise Invalid("invalid job id in header")
        self.header = dict(format_version=fv, version=version, rank=rank, world_size=world,
                           created_ns=created, align=align, csum_algo=algo, job=job,
                           lineage=lineage)

    def _parse_footer(self, f):
        flen = len(f)
        if f[0:8] != b"CKPTFOOT":
            raise Invalid("bad footer magic")
        fv, nreg, nchunk, rt, cb, data_bytes, stored_bytes = struct.unpack_from("<IIQQQQQ", f, 8)
        if not 1 <= fv <= FORMAT_VERSION:
            raise Invalid("footer: format version %d not supported" % fv, unsupported=True)
        if nreg > MAX_REGIONS:
            raise Invalid("region count %d too large" % nreg)
        rest = flen - FOOTER_FIXED
        if rt > rest or (rest - rt) % CHUNK_ENTRY or (rest - rt) // CHUNK_ENTRY != nchunk:
            raise Invalid("table sizes (%d regions, %d chunks) do not match footer length %d"
                          % (nreg, nchunk, flen))
        if cb < MIN_CHUNK or cb > MAX_CHUNK or cb % ALIGN:
            raise Invalid("chunk size %d invalid" % cb)
        if rt < nreg * REGION_FIXED:
            raise Invalid("region table too small for %d regions" % nreg)
        self.footer = dict(format_version=fv, region_count=nreg, chunk_count=nchunk,
                           region_table_bytes=rt, chunk_bytes=cb, data_bytes=data_bytes,
                           stored_bytes=stored_bytes)

        regions = []
        names = set()
        p = FOOTER_FIXED
        rend = FOOTER_FIXED + rt
        nxt = 0
        total = 0
        for i in range(nreg):
            if rend - p < REGION_FIXED:
                raise Invalid("region %d runs past the region table" % i)
            el, name_len, dtype, ndim, device, ccount, nbytes, cfirst = \
                struct.unpack_from("<IHBBIIQQ", f, p)
            if (ndim > MAX_DIMS or name_len == 0 or name_len > MAX_NAME
                    or el != REGION_FIXED + 24 * ndim + align_up(name_len, 8) or el > rend - p):
                raise Invalid("region %d entry malformed" % i)
            if dtype >= len(DTYPES):
                raise Invalid("region %d has unknown dtype %d" % (i, dtype))
            q = p + REGION_FIXED
            shape = list(struct.unpack_from("<%dQ" % ndim, f, q))
            offs = list(struct.unpack_from("<%dQ" % ndim, f, q + 8 * ndim))
            exts = list(struct.unpack_from("<%dQ" % ndim, f, q + 16 * ndim))
            for d in range(ndim):
                if offs[d] > shape[d] or exts[d] > shape[d] - offs[d]:
                    raise Invalid("region %d: part outside the global shape in dim %d" % (i, d))
            nstart = q + 24 * ndim
            name = f[nstart:nstart + name_len]
            if not name_valid(name):
                raise Invalid("region %d has an unsafe name" % i)
            if name in names:
                raise Invalid("region name '%s' appears twice" % show(name))
            names.add(name)
            if cfirst != nxt or ccount > nchunk - nxt:
                raise Invalid("region '%s' chunk range out of order or out of table" % show(name))
            want = (nbytes + cb - 1) // cb
            if want != ccount:
                raise Invalid("region '%s': %d bytes need %d chunks, table has %d"
                              % (show(name), nbytes, want, ccount))
            nxt += ccount
            if nbytes > U64_MAX - total:
                raise Invalid("region sizes overflow")
            total += nbytes
            regions.append(dict(name=name, dtype=dtype, ndim=ndim, device=device,
                                chunk_count=ccount, bytes=nbytes, chunk_first=cfirst,
                                global_shape=shape, offsets=offs, extents=exts,
                                entry_offset=p, entry_len=el, name_end=nstart + name_len))
            p += el
        if p != rend or nxt != nchunk:
            raise Invalid("region table does not cover the chunk table exactly")
        if total != data_bytes:
            raise Invalid("regions hold %d bytes, footer says %d" % (total, data_bytes))

        fo = self.tail["footer_offset"]
        chunks = [None] * nchunk
        stored = 0
        for ri, r in enumerate(regions):
            for k in range(r["chunk_count"]):
                i = r["chunk_first"] + k
                off, slen, rlen, flags, reg, csum = struct.unpack_from(
                    "<QIIIIQ", f, rend + CHUNK_ENTRY * i)
                if k + 1 < r["chunk_count"]:
                    want_raw = cb
                else:
                    want_raw = r["bytes"] - k * cb
                z = flags & FLAG_ZSTD
                if (reg != ri or rlen != want_raw or flags & ~KNOWN_FLAGS or slen == 0
                        or (slen > rlen if z else slen != rlen)
                        or (not z and flags >> 8)):
                    raise Invalid("chunk %d of region '%s' has an invalid entry" % (k, show(r["name"])))
                if off < HEADER_LEN or off % ALIGN or off > fo or slen > fo - off:
                    raise Invalid("chunk %d of region '%s' lies outside the data area"
                                  % (k, show(r["name"])))
                chunks[i] = dict(offset=off, stored_len=slen, raw_len=rlen, flags=flags,
                                 region=reg, checksum=csum, index_in_region=k)
                stored += slen
        if stored != stored_bytes:
            raise Invalid("chunks hold %d stored bytes, footer says %d" % (stored, stored_bytes))
        spans = sorted((c["offset"], c["offset"] + c["stored_len"]) for c in chunks)
        for (_, end), (off, _) in zip(spans, spans[1:]):
            if off < end:
                raise Invalid("two chunks store overlapping bytes (at offset %d)" % off)
        self.regions = regions
        self.chunks = chunks

    # -------------------------------------------------------------- strict
    def _seal_table(self, gap, start):
        """The seal table in the footer-to-tail gap, checked, or None."""
        if gap[start:start + 8] != b"CKPTSEAL":
            return None
        n = len(self.chunks)
        body = gap[start:start + 32 + 8 * n]
        if len(gap) < start + 40 + 8 * n:
            raise Invalid("strict: seal table does not fit before the tail")
        version, _, count, fsum = struct.unpack_from("<IIQQ", body, 8)
        (tsum,) = struct.unpack_from("<Q", gap, start + 32 + 8 * n)
        if version != 1 or count != n or fsum != self.tail["footer_checksum"] or h64(body) != tsum:
            raise Invalid("strict: seal table does not check")
        return struct.unpack_from("<%dQ" % n, body, 32)

    def _strict_checks(self, f):
        """What the writer guarantees beyond the validation rules."""
        h = self._read(0, HEADER_LEN)
        if any(h[180:184]) or any(h[192:248]) or any(h[256:HEADER_LEN]):
            raise Invalid("strict: reserved header bytes not zero")
        if any(h[48 + len(self.header["job"]):176]):
            raise Invalid("strict: job field padding not zero")
        if any(f[56:64]):
            raise Invalid("strict: reserved footer bytes not zero")
        versions = {self.header["format_version"], self.footer["format_version"],
                    self.tail["format_version"]}
        if len(versions) != 1:
            raise Invalid("strict: header, footer and tail give different format versions")
        fo, fl = self.tail["footer_offset"], self.tail["footer_length"]
        gap = self._read(fo + fl, self.file_length - TAIL_LEN - fo - fl)
        table = self._seal_table(gap, align_up(fl, 64) - fl)
        if table is not None:
            # A node-DRAM image's seal table (format.md 6.4), then zeros.
            start, tlen = align_up(fl, 64) - fl, 40 + 8 * len(self.chunks)
            if self.file_length != fo + align_up(align_up(fl, 64) + tlen + TAIL_LEN, ALIGN):
                raise Invalid("strict: file length does not fit the footer and its seal table")
            gap = gap[:start] + gap[start + tlen:]
        elif self.file_length != fo + align_up(fl + TAIL_LEN, ALIGN):
            raise Invalid("strict: file length is not footer_offset + ALIGN_UP(footer_length + 64)")
        if any(gap):
            raise Invalid("strict: padding between footer and tail not zero")
        for r in self.regions:
            if any(f[r["name_end"]:r["entry_offset"] + r["entry_len"]]):
                raise Invalid("strict: region '%s' name padding not zero" % show(r["name"]))
            if r["device"] != 0:
                raise Invalid("strict: region '%s' device %d" % (show(r["name"]), r["device"]))
            dname, dsize = DTYPES[r["dtype"]]
            if r["ndim"] and dname != "bytes":
                n = 1
                for e in r["extents"]:
                    n *= e
                if n * dsize != r["bytes"]:
                    raise Invalid("strict: region '%s' bytes do not match extents" % show(r["name"]))
            want_e = dsize if dname != "bytes" and dsize > 1 else 0
            for k in range(r["chunk_count"]):
                c = self.chunks[r["chunk_first"] + k]
                if c["flags"] & FLAG_ZSTD:
                    if c["flags"] >> 8 != want_e:
                        raise Invalid("strict: region '%s' chunk %d shuffle %d, dtype %s"
                                      % (show(r["name"]), k, c["flags"] >> 8, dname))
                    if c["stored_len"] > c["raw_len"] - c["raw_len"] // 8:
                        raise Invalid("strict: region '%s' chunk %d compressed but saves less "
                                      "than 1/8" % (show(r["name"]), k))
        spans = sorted((c["offset"], align_up(c["stored_len"], ALIGN)) for c in self.chunks)
        pos = HEADER_LEN
        for off, n in spans:
            if off != pos:
                raise Invalid("strict: chunk data not packed (gap or overlap at %d)" % off)
            pos += n
        if pos != fo:
            raise Invalid("strict: footer does not follow the last chunk")

    # -------------------------------------------------------------- data
    def chunk_raw(self, i):
        """Raw bytes of chunk i, verified (rules 30-31)."""
        c = self.chunks[i]
        r = self.regions[c["region"]]
        where = "region '%s' chunk %d" % (show(r["name"]), c["index_in_region"])
        n = align_up(c["stored_len"], ALIGN) if self.strict else c["stored_len"]
        buf = self._read(c["offset"], n)
        if self.strict and any(buf[c["stored_len"]:]):
            raise Invalid("strict: %s: padding after the chunk not zero" % where)
        data = buf[:c["stored_len"]]
        if c["flags"] & FLAG_ZSTD:
            try:
                data = zstd_decode(data, c["raw_len"])
            except Invalid as e:
                raise Invalid("%s: compressed data does not decode: %s" % (where, e))
            except RuntimeError:
                raise
            except Exception as e:  # the zstd module's own errors
                raise Invalid("%s: compressed data does not decode: %s" % (where, e))
            if len(data) != c["raw_len"]:
                raise Invalid("%s: compressed data gives %d bytes, expected %d"
                              % (where, len(data), c["raw_len"]))
            e = (c["flags"] >> 8) & 0xff
            if e > 1:
                data = unshuffle(data, e)
        s = tree_checksum(data)
        if s != c["checksum"]:
            raise Invalid("%s: checksum mismatch (stored %016x, computed %016x)"
                          % (where, c["checksum"], s))
        return data

    def find_region(self, name):
        for i, r in enumerate(self.regions):
            if r["name"] == name:
                return i
        return -1

    def write_region(self, ri, out):
        r = self.regions[ri]
        for k in range(r["chunk_count"]):
            out.write(self.chunk_raw(r["chunk_first"] + k))

    def describe(self, with_chunks=False):
        hd = dict(self.header)
        hd["job"] = show(hd["job"])
        regs = []
        for r in self.regions:
            d = {k: r[k] for k in ("dtype", "ndim", "device", "bytes", "chunk_first",
                                  "chunk_count", "global_shape", "offsets", "extents")}
            d["name"] = show(r["name"])
            d["dtype_name"] = DTYPES[r["dtype"]][0]
            d["compressed_chunks"] = sum(
                1 for k in range(r["chunk_count"])
                if self.chunks[r["chunk_first"] + k]["flags"] & FLAG_ZSTD)
            regs.append(d)
        out = dict(path=self.path, file_length=self.file_length, header=hd,
                   tail=dict(self.tail), footer=dict(self.footer), regions=regs)
        if with_chunks:
            out["chunks"] = [dict(c) for c in self.chunks]
        return out


# ------------------------------------------------------------------ main

def usage(msg=None):
    if msg:
        sys.stderr.write("ckpt_read.py: %s\n" % msg)
    sys.stderr.write(__doc__.split("\n\n")[2] + "\n")
    return EXIT_USAGE


def print_info(s, as_json):
    d = s.describe()
    if as_json:
        print(json.dumps(d, indent=1))
        return
    h, f = d["header"], d["footer"]
    print("%s: job %s version %d rank %d/%d, format %d" % (
        s.path, h["job"], h["version"], h["rank"], h["world_size"], h["format_version"]))
    print("  %d bytes in %d regions, %d chunks of %d, %d stored; file %d bytes" % (
        f["data_bytes"], f["region_count"], f["chunk_count"], f["chunk_bytes"],
        f["stored_bytes"], d["file_length"]))
    for r in d["regions"]:
        print("  %-32s %-6s %12d bytes  %d chunks (%d compressed)%s" % (
            r["name"], r["dtype_name"], r["bytes"], r["chunk_count"], r["compressed_chunks"],
            "  shape %s at %s" % (r["global_shape"], r["offsets"]) if r["ndim"] else ""))


def write_atomic(s, ri, dst, tmp):
    """Writes region ri to tmp, then renames it to dst; no partial dst."""
    try:
        with open(tmp, "wb") as out:
            s.write_region(ri, out)
        os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv):
    args = argv[1:]
    if not args:
        return usage()
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(__doc__)
        return EXIT_OK
    cmd, args = args[0], args[1:]
    as_json = "--json" in args
    strict = "--strict" in args
    pos = [a for a in args if a not in ("--json", "--strict")]
    for a in pos:
        if a.startswith("--"):
            return usage("unknown option '%s'" % a)
    need = {"info": 1, "verify": 1, "dump": 3, "dump-all": 2}
    if cmd not in need:
        return usage("unknown command '%s'" % cmd)
    if len(pos) != need[cmd]:
        return usage("%s needs %d argument(s)" % (cmd, need[cmd]))
    if xxhash is None:
        sys.stderr.write("ckpt_read.py: needs the Python module xxhash "
                         "(apt-get install python3-xxhash)\n")
        return EXIT_ERROR
    path = pos[0]
    try:
        s = Shard(path, strict=strict)
    except Invalid as e:
        what = "unsupported" if e.unsupported else "INVALID"
        if as_json:
            print(json.dumps(dict(path=path, ok=False, error=str(e))))
        else:
            sys.stderr.write("%s: %s: %s\n" % (path, what, e))
        return EXIT_CORRUPT
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (path, e))
        return EXIT_ERROR
    try:
        if cmd == "info":
            print_info(s, as_json)
        elif cmd == "verify":
            for i in range(len(s.chunks)):
                s.chunk_raw(i)
            if as_json:
                print(json.dumps(dict(path=path, ok=True, chunks=len(s.chunks),
                                      bytes=s.footer["data_bytes"])))
            else:
                print("%s: ok (%d chunks, %d bytes)" % (path, len(s.chunks),
                                                         s.footer["data_bytes"]))
        elif cmd == "dump":
            ri = s.find_region(os.fsencode(pos[1]))
            if ri < 0:
                sys.stderr.write("%s: no region named '%s'\n" % (path, pos[1]))
                return EXIT_NOTFOUND
            if pos[2] == "-":
                s.write_region(ri, sys.stdout.buffer)
            else:
                write_atomic(s, ri, pos[2], pos[2] + ".partial")
        elif cmd == "dump-all":
            outdir = os.fsencode(pos[1])
            os.makedirs(outdir, exist_ok=True)
            for ri, r in enumerate(s.regions):
                # Names were validated: no '/', '\\', NUL, not '.' or '..'.
                dst = os.path.join(outdir, r["name"])
                tmp = os.path.join(outdir, b"." + r["name"] + b".partial")
                write_atomic(s, ri, dst, tmp)
    except Invalid as e:
        if as_json:
            print(json.dumps(dict(path=path, ok=False, error=str(e))))
        else:
            sys.stderr.write("%s: CORRUPT: %s\n" % (path, e))
        return EXIT_CORRUPT
    except RuntimeError as e:
        sys.stderr.write("ckpt_read.py: %s\n" % e)
        return EXIT_ERROR
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (path, e))
        return EXIT_ERROR
    finally:
        s.close()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv))
