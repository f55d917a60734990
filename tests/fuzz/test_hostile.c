/* Hostile and malformed shard files, crafted field by field. Each must be
 * refused with -CKPT_ECORRUPT or -CKPT_EFORMAT and a reason, the same way by
 * ckpt__shard_parse_mem and by ckpt__shard_open; damaged chunk data must be
 * caught by ckpt__shard_read. Files are made with the library's own encoders
 * and resealed, so that only the hostile field is wrong and the checks
 * behind the checksums are the ones tested. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include "fuzz_common.h"
#include "helpers.h"
#include "format/index.h"
#include "format/reader.h"

#define CB 65536u
#define ALPHA_BYTES 100000u
#define OMEGA_BYTES 5000u

/* Byte offsets inside the encoded footer, region entries and tail. */
enum { F_VERSION = 8, F_NREG = 12, F_NCHUNK = 16, F_RTBYTES = 24, F_CHUNK_BYTES = 32,
       F_DATA_BYTES = 40, F_STORED_BYTES = 48 };
enum { R_ENTRY_LEN = 0, R_NAME_LEN = 4, R_DTYPE = 6, R_NDIM = 7, R_CHUNK_COUNT = 12 };
enum { C_OFFSET = 0, C_STORED = 8, C_RAW = 12, C_FLAGS = 16 };
enum { H_FORMAT = 8, H_LEN = 12, H_RANK = 24, H_WORLD = 28, H_ALIGN = 40, H_CSUM_ALGO = 44,
       H_JOB = 48, H_JOB_LEN = 176 };
enum { T_FORMAT = 8, T_LEN = 12 };

/* A small valid shard: regions "alpha" (two chunks, the last one short),
 * "empty" (no chunks) and "omega" (one chunk, zstd when compress). */
typedef struct hshard {
	ckpt_fmt_header h;
	ckpt_fmt_footer f;
	ckpt_fmt_region reg[3];
	ckpt_fmt_chunk chk[3];
	uint8_t *stored[3];   /* chunk bytes as written */
	uint32_t slen[3];     /* and how many, whatever the table says */
	uint64_t where[3];
	uint64_t footer_offset;
} hshard;

static uint8_t alpha_raw[ALPHA_BYTES], omega_raw[OMEGA_BYTES];
static int fails;
static char dir[512];

#define CHECK(cond, ...) do { if (!(cond)) { fails++; fflush(stdout); fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

static void set_region(ckpt_fmt_region *r, const char *name, uint64_t bytes, uint64_t first, uint32_t n)
{
	memset(r, 0, sizeof(*r));
	r->name_len = (uint16_t)strlen(name);
	memcpy(r->name, name, r->name_len);
	r->dtype = CKPT_DTYPE_BYTES;
	r->bytes = bytes;
	r->chunk_first = first;
	r->chunk_count = n;
}

/* compress: 0 raw omega, 1 zstd omega, 2 zstd frame of the wrong length. */
static void hs_init(hshard *x, int compress)
{
	memset(x, 0, sizeof(*x));
	x->h.version = 7;
	x->h.world_size = 1;
	x->h.created_ns = 1;
	snprintf(x->h.job, sizeof(x->h.job), "hostile");
	set_region(&x->reg[0], "alpha", ALPHA_BYTES, 0, 2);
	set_region(&x->reg[1], "empty", 0, 2, 0);
	set_region(&x->reg[2], "omega", OMEGA_BYTES, 2, 1);
	const uint8_t *raw[3] = { alpha_raw, alpha_raw + CB, omega_raw };
	uint32_t rawlen[3] = { CB, ALPHA_BYTES - CB, OMEGA_BYTES };
	uint64_t off = CKPT_FMT_HEADER_LEN, stored = 0;
	for (int i = 0; i < 3; i++) {
		ckpt_fmt_chunk *c = &x->chk[i];
		c->raw_len = rawlen[i];
		c->region = i < 2 ? 0 : 2;
		c->checksum = ckpt_kern_checksum(raw[i], rawlen[i]);
		c->stored_len = rawlen[i];
		x->stored[i] = malloc(ckpt_kern_compress_bound(rawlen[i]));
		T_ASSERT(x->stored[i]);
		memcpy(x->stored[i], raw[i], rawlen[i]);
		if (i == 2 && compress) {
			ZSTD_CCtx *cc = ZSTD_createCCtx();
			size_t n = ckpt_kern_compress(cc, 1, x->stored[i], ckpt_kern_compress_bound(rawlen[i]), raw[i],
			                              compress == 2 ? rawlen[i] - 1000 : rawlen[i], 1, NULL);
			ZSTD_freeCCtx(cc);
			T_ASSERT(n > 0);
			c->stored_len = (uint32_t)n;
			c->flags = CKPT_CHUNK_ZSTD;
		}
		x->slen[i] = c->stored_len;
		c->offset = x->where[i] = off;
		off += CKPT_ALIGN_UP(c->stored_len, CKPT_ALIGN);
		stored += c->stored_len;
	}
	x->footer_offset = off;
	x->f.region_count = 3;
	x->f.chunk_count = 3;
	x->f.chunk_bytes = CB;
	x->f.data_bytes = ALPHA_BYTES + OMEGA_BYTES;
	x->f.stored_bytes = stored;
	x->f.regions = x->reg;
	x->f.chunks = x->chk;
}

/* A copy of x whose tables are its own. */
static void hs_copy(hshard *y, const hshard *x)
{
	*y = *x;
	y->f.regions = y->reg;
	y->f.chunks = y->chk;
}

static void hs_free(hshard *x)
{
	for (int i = 0; i < 3; i++)
		free(x->stored[i]);
}

/* Encodes x into a new buffer (freed by the caller). */
static uint8_t *hs_encode(const hshard *x, size_t *len)
{
	size_t tl = ckpt__fmt_trailer_len(&x->f);
	*len = x->footer_offset + tl;
	uint8_t *buf = calloc(1, *len);
	T_ASSERT(buf);
	ckpt__fmt_header_encode(buf, &x->h);
	for (uint32_t i = 0; i < 3 && x->stored[i]; i++)
		memcpy(buf + x->where[i], x->stored[i], x->slen[i]);
	ckpt__fmt_trailer_encode(buf + x->footer_offset, tl, &x->f, x->footer_offset,
	                         ckpt__get_le64(buf + FZ_HEADER_CSUM_OFF));
	return buf;
}

static const char *write_file(const char *name, const uint8_t *buf, size_t len)
{
	static char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	T_ASSERT(fd >= 0);
	T_ASSERT(len == 0 || ckpt__pwrite_full(fd, buf, len, 0) == 0);
	close(fd);
	return path;
}

static int is_err(int r) { return r == -CKPT_ECORRUPT || r == -CKPT_EFORMAT; }

/* want: -CKPT_ECORRUPT, -CKPT_EFORMAT, or 0 for either of them. */
static void expect_reject(const char *label, const uint8_t *buf, size_t len, int want)
{
	ckpt_shard s;
	char why[256] = "", why2[256] = "";
	int r = ckpt__shard_parse_mem(buf, len, &s, why, sizeof(why));
	if (r == 0) {
		CHECK(0, "%s: hostile shard accepted by ckpt__shard_parse_mem", label);
		ckpt__shard_close(&s);
	} else {
		CHECK(want ? r == want : is_err(r), "%s: got %d (%s)", label, r, ckpt_strerror(r));
		CHECK(why[0], "%s: refused without a reason", label);
	}
	int r2 = ckpt__shard_open(write_file("case.ckpt", buf, len), &s, why2, sizeof(why2));
	if (r2 == 0)
		ckpt__shard_close(&s);
	CHECK(r2 == r, "%s: ckpt__shard_open says %d (%s), parse_mem %d", label, r2, why2, r);
	if (r != 0)
		printf("ok   %-44s %s\n", label, why);
}

static void expect_accept(const char *label, const uint8_t *buf, size_t len)
{
	ckpt_shard s;
	char why[256] = "";
	int r = ckpt__shard_parse_mem(buf, len, &s, why, sizeof(why));
	CHECK(r == 0, "%s: valid shard refused: %s", label, why);
	if (r == 0) {
		const char *bad = fz_shard_invariants(&s, len);
		CHECK(!bad, "%s: %s", label, bad);
		ckpt__shard_close(&s);
		printf("ok   %-44s accepted\n", label);
	}
}

/* Encodes x, lets patch change bytes, reseals, expects refusal. */
typedef void (*patch_fn)(uint8_t *buf, size_t len, uint64_t fo);
static void expect_patch(const char *label, const hshard *x, patch_fn patch, int reseal, int want)
{
	size_t len;
	uint8_t *buf = hs_encode(x, &len);
	patch(buf, len, x->footer_offset);
	if (reseal)
		fz_reseal(buf, len);
	expect_reject(label, buf, len, want);
	free(buf);
}

static void expect_struct(const char *label, const hshard *x, int want)
{
	size_t len;
	uint8_t *buf = hs_encode(x, &len);
	expect_reject(label, buf, len, want);
	free(buf);
}

/* ---- patches: tail ---- */
#define TAIL(buf, len) ((buf) + (len) - CKPT_FMT_TAIL_LEN)
static void p_fo_end(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 16, l); }
static void p_fo_beyond(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 16, CKPT_ALIGN_UP(l, 4096) + 4096); }
static void p_fo_zero(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 16, 0); }
static void p_fo_unaligned(uint8_t *b, size_t l, uint64_t fo) { ckpt__put_le64(TAIL(b, l) + 16, fo + 8); }
static void p_fo_max(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 16, UINT64_MAX - 4095); }
static void p_fo_data(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 16, 4096); }
static void p_fl_max(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 24, UINT64_MAX); }
static void p_fl_huge(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 24, 1ull << 31); }
static void p_fl_zero(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 24, 0); }
static void p_fl_short(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 24, 63); }
static void p_fl_into_tail(uint8_t *b, size_t l, uint64_t fo) { ckpt__put_le64(TAIL(b, l) + 24, l - fo - 63); }
static void p_flen(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le64(TAIL(b, l) + 40, l + 1); }
static void p_tail_version(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le32(TAIL(b, l) + T_FORMAT, 2); }
static void p_tail_len(uint8_t *b, size_t l, uint64_t fo) { (void)fo; ckpt__put_le32(TAIL(b, l) + T_LEN, 128); }
static void p_tail_csum(uint8_t *b, size_t l, uint64_t fo) { (void)fo; TAIL(b, l)[20] ^= 1; }
static void p_footer_csum(uint8_t *b, size_t l, uint64_t fo) { (void)l; b[fo + 70] ^= 0x40; }

/* ---- patches: footer counts ---- */
static void p_nreg_max(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + F_NREG, UINT32_MAX); }
static void p_nreg_limit(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + F_NREG, CKPT_FMT_MAX_REGIONS); }
static void p_nreg_more(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + F_NREG, 4); }
static void p_nreg_less(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + F_NREG, 2); }
static void p_nchunk_max(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_NCHUNK, UINT64_MAX); }
static void p_nchunk_wrap(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_NCHUNK, (1ull << 59) + 3); }
static void p_nchunk_more(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_NCHUNK, 4); }
static void p_rt_max(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_RTBYTES, UINT64_MAX); }
static void p_rt_zero(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_RTBYTES, 0); }
static void p_cb_zero(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_CHUNK_BYTES, 0); }
static void p_cb_odd(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_CHUNK_BYTES, CB + 1); }
static void p_cb_huge(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_CHUNK_BYTES, 1ull << 40); }
static void p_data_bytes(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_DATA_BYTES, 1); }
static void p_stored_bytes(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le64(b + fo + F_STORED_BYTES, UINT64_MAX); }
static void p_footer_version(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + F_VERSION, 2); }
static void p_footer_magic(uint8_t *b, size_t l, uint64_t fo) { (void)l; b[fo] = 'X'; }

/* ---- patches: region entries (the first one, "alpha") and chunk entries ---- */
#define REG0 (CKPT_FMT_FOOTER_FIXED)
#define CHUNK0 (CKPT_FMT_FOOTER_FIXED + 3 * 40)
static void p_el_wrong(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + REG0 + R_ENTRY_LEN, 48); }
static void p_el_huge(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + REG0 + R_ENTRY_LEN, UINT32_MAX); }
static void p_name_len_long(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le16(b + fo + REG0 + R_NAME_LEN, 1000); }
static void p_ndim_big(uint8_t *b, size_t l, uint64_t fo) { (void)l; b[fo + REG0 + R_NDIM] = 200; }
static void p_dtype_bad(uint8_t *b, size_t l, uint64_t fo) { (void)l; b[fo + REG0 + R_DTYPE] = 200; }
static void p_rchunks_max(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + REG0 + R_CHUNK_COUNT, UINT32_MAX); }
static void p_raw_len(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + CHUNK0 + C_RAW, CB - 1); }
static void p_flags(uint8_t *b, size_t l, uint64_t fo) { (void)l; ckpt__put_le32(b + fo + CHUNK0 + C_FLAGS, 0x2); }

/* ---- patches: header ---- */
static void p_h_version(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_FORMAT, 2); }
static void p_h_version0(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_FORMAT, 0); }
static void p_h_version_max(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_FORMAT, UINT32_MAX); }
static void p_h_len(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_LEN, 4097); }
static void p_h_rank(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_RANK, 5); ckpt__put_le32(b + H_WORLD, 2); }
static void p_h_world0(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_WORLD, 0); }
static void p_h_align(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_ALIGN, 512); }
static void p_h_csum_algo(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_CSUM_ALGO, 7); }
static void p_h_job0(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_JOB_LEN, 0); }
static void p_h_job65(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_JOB_LEN, 65); }
static void p_h_job_max(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; ckpt__put_le32(b + H_JOB_LEN, UINT32_MAX); }
static void p_h_job_nul(uint8_t *b, size_t l, uint64_t fo)
{
	(void)l; (void)fo;
	memcpy(b + H_JOB, "ab\0cd", 5);
	ckpt__put_le32(b + H_JOB_LEN, 5);
}
static void p_h_magic(uint8_t *b, size_t l, uint64_t fo) { (void)l; (void)fo; b[0] = 'X'; }
static void p_h_only(uint8_t *b, size_t l, uint64_t fo)
{
	/* Header changed and its own checksum redone, the tail's copy not. */
	(void)l; (void)fo;
	b[16] ^= 1;
	ckpt__put_le64(b + FZ_HEADER_CSUM_OFF, ckpt_kern_hash(b, FZ_HEADER_CSUM_OFF));
}

static void garbage_cases(void)
{
	static uint8_t rnd[1 << 16], zero[16384];
	t_fill(rnd, sizeof(rnd), 99);
	expect_reject("empty file", rnd, 0, -CKPT_ECORRUPT);
	expect_reject("1 byte", rnd, 1, -CKPT_ECORRUPT);
	expect_reject("63 bytes", rnd, 63, -CKPT_ECORRUPT);
	expect_reject("one byte short of header + tail", rnd, 4159, -CKPT_ECORRUPT);
	expect_reject("64 KiB of random bytes", rnd, sizeof(rnd), -CKPT_ECORRUPT);
	expect_reject("16 KiB of zeros", zero, sizeof(zero), -CKPT_ECORRUPT);
	memcpy(rnd, "CKPTSHRD", 8);
	memcpy(rnd + sizeof(rnd) - 64, "CKPTTAIL", 8);
	expect_reject("random bytes between real magics", rnd, sizeof(rnd), -CKPT_ECORRUPT);
	fz_reseal(rnd, sizeof(rnd));
	expect_reject("random bytes, magics, resealed", rnd, sizeof(rnd), 0);
}

static void length_cases(const hshard *x)
{
	size_t len;
	uint8_t *buf = hs_encode(x, &len);
	uint8_t *big = calloc(1, len + 4096);
	T_ASSERT(big);
	memcpy(big, buf, len);
	expect_accept("valid shard", buf, len);
	size_t cuts[] = { 4096, 4160, x->footer_offset, x->footer_offset + 1, len - 64, len - 63, len - 1 };
	char label[64];
	for (size_t i = 0; i < CKPT_ARRAY_LEN(cuts); i++) {
		snprintf(label, sizeof(label), "truncated to %zu of %zu bytes", cuts[i], len);
		expect_reject(label, buf, cuts[i], -CKPT_ECORRUPT);
	}
	expect_reject("one zero byte appended", big, len + 1, -CKPT_ECORRUPT);
	expect_reject("a zero block appended", big, len + 4096, -CKPT_ECORRUPT);
	/* Tail moved to the end of the longer file: its length field is wrong. */
	memmove(big + len + 4096 - 64, big + len - 64, 64);
	expect_reject("tail moved to the end of a longer file", big, len + 4096, -CKPT_ECORRUPT);
	free(big);
	free(buf);
}

static void location_cases(const hshard *x)
{
	expect_patch("footer offset at end of file", x, p_fo_end, 1, -CKPT_ECORRUPT);
	expect_patch("footer offset past end of file", x, p_fo_beyond, 1, -CKPT_ECORRUPT);
	expect_patch("footer offset 0 (in the header)", x, p_fo_zero, 1, -CKPT_ECORRUPT);
	expect_patch("footer offset not aligned", x, p_fo_unaligned, 1, -CKPT_ECORRUPT);
	expect_patch("footer offset near 2^64", x, p_fo_max, 1, -CKPT_ECORRUPT);
	expect_patch("footer offset at the chunk data", x, p_fo_data, 1, -CKPT_ECORRUPT);
	expect_patch("footer length 2^64-1", x, p_fl_max, 1, -CKPT_ECORRUPT);
	expect_patch("footer length 2 GiB", x, p_fl_huge, 1, -CKPT_ECORRUPT);
	expect_patch("footer length 0", x, p_fl_zero, 1, -CKPT_ECORRUPT);
	expect_patch("footer length below its fixed part", x, p_fl_short, 1, -CKPT_ECORRUPT);
	expect_patch("footer overlapping the tail", x, p_fl_into_tail, 1, -CKPT_ECORRUPT);
	expect_patch("tail claims another file length", x, p_flen, 1, -CKPT_ECORRUPT);
	expect_patch("tail format version 2", x, p_tail_version, 1, -CKPT_EFORMAT);
	expect_patch("tail length field wrong", x, p_tail_len, 1, -CKPT_ECORRUPT);
	expect_patch("tail checksum wrong", x, p_tail_csum, 0, -CKPT_ECORRUPT);
	expect_patch("footer byte changed, checksum kept", x, p_footer_csum, 0, -CKPT_ECORRUPT);
}

static void count_cases(const hshard *x)
{
	expect_patch("region count 2^32-1", x, p_nreg_max, 1, -CKPT_ECORRUPT);
	expect_patch("region count at the format limit", x, p_nreg_limit, 1, -CKPT_ECORRUPT);
	expect_patch("region count one too many", x, p_nreg_more, 1, -CKPT_ECORRUPT);
	expect_patch("region count one too few", x, p_nreg_less, 1, -CKPT_ECORRUPT);
	expect_patch("chunk count 2^64-1", x, p_nchunk_max, 1, -CKPT_ECORRUPT);
	expect_patch("chunk count 2^59+3 (wraps x32)", x, p_nchunk_wrap, 1, -CKPT_ECORRUPT);
	expect_patch("chunk count one too many", x, p_nchunk_more, 1, -CKPT_ECORRUPT);
	expect_patch("region table bytes 2^64-1", x, p_rt_max, 1, -CKPT_ECORRUPT);
	expect_patch("region table bytes 0", x, p_rt_zero, 1, -CKPT_ECORRUPT);
	expect_patch("chunk size 0", x, p_cb_zero, 1, -CKPT_ECORRUPT);
	expect_patch("chunk size not aligned", x, p_cb_odd, 1, -CKPT_ECORRUPT);
	expect_patch("chunk size 1 TiB", x, p_cb_huge, 1, -CKPT_ECORRUPT);
	expect_patch("data bytes wrong", x, p_data_bytes, 1, -CKPT_ECORRUPT);
	expect_patch("stored bytes wrong", x, p_stored_bytes, 1, -CKPT_ECORRUPT);
	expect_patch("footer format version 2", x, p_footer_version, 1, -CKPT_EFORMAT);
	expect_patch("footer magic wrong", x, p_footer_magic, 1, -CKPT_ECORRUPT);
	expect_patch("region entry length wrong", x, p_el_wrong, 1, -CKPT_ECORRUPT);
	expect_patch("region entry length 2^32-1", x, p_el_huge, 1, -CKPT_ECORRUPT);
	expect_patch("region name length past the entry", x, p_name_len_long, 1, -CKPT_ECORRUPT);
	expect_patch("region with 200 dimensions", x, p_ndim_big, 1, -CKPT_ECORRUPT);
	expect_patch("region with unknown dtype", x, p_dtype_bad, 1, -CKPT_ECORRUPT);
	expect_patch("region chunk count 2^32-1", x, p_rchunks_max, 1, -CKPT_ECORRUPT);
	expect_patch("chunk raw length wrong", x, p_raw_len, 1, -CKPT_ECORRUPT);
	expect_patch("chunk with unknown flag", x, p_flags, 1, -CKPT_ECORRUPT);
}

static void header_cases(const hshard *x)
{
	expect_patch("header format version 2", x, p_h_version, 1, -CKPT_EFORMAT);
	expect_patch("header format version 0", x, p_h_version0, 1, 0);
	expect_patch("header format version 2^32-1", x, p_h_version_max, 1, -CKPT_EFORMAT);
	expect_patch("header length field wrong", x, p_h_len, 1, -CKPT_ECORRUPT);
	expect_patch("rank not below world size", x, p_h_rank, 1, -CKPT_ECORRUPT);
	expect_patch("world size 0", x, p_h_world0, 1, -CKPT_ECORRUPT);
	expect_patch("alignment 512", x, p_h_align, 1, -CKPT_EFORMAT);
	expect_patch("unknown checksum algorithm", x, p_h_csum_algo, 1, -CKPT_EFORMAT);
	expect_patch("job id length 0", x, p_h_job0, 1, -CKPT_ECORRUPT);
	expect_patch("job id length 65", x, p_h_job65, 1, -CKPT_ECORRUPT);
	expect_patch("job id length 2^32-1", x, p_h_job_max, 1, -CKPT_ECORRUPT);
	expect_patch("job id with a NUL inside (\"ab\\0cd\")", x, p_h_job_nul, 1, -CKPT_ECORRUPT);
	expect_patch("header magic wrong", x, p_h_magic, 1, -CKPT_ECORRUPT);
	expect_patch("header checksum wrong", x, p_h_version, 0, -CKPT_ECORRUPT);
	expect_patch("header and tail disagree", x, p_h_only, 0, -CKPT_ECORRUPT);
	hshard y;
	hs_copy(&y, x);
	snprintf(y.h.job, sizeof(y.h.job), "../evil");
	expect_struct("job id \"../evil\"", &y, -CKPT_ECORRUPT);
	snprintf(y.h.job, sizeof(y.h.job), ".hidden");
	expect_struct("job id \".hidden\"", &y, -CKPT_ECORRUPT);
}

static void region_cases(const hshard *x)
{
	static const struct { const char *name; size_t len; } names[] = {
		{ "../evil", 7 }, { "..", 2 }, { ".", 1 }, { "a/b", 3 }, { "/abs", 4 }, { "evil/", 5 },
		{ "a\\b", 3 }, { "a\0b", 3 }, { "\0", 1 }, { "alpha\0", 6 },
	};
	char label[96];
	for (size_t i = 0; i < CKPT_ARRAY_LEN(names); i++) {
		hshard y;
	hs_copy(&y, x);
		memset(y.reg[2].name, 0, sizeof(y.reg[2].name));
		memcpy(y.reg[2].name, names[i].name, names[i].len);
		y.reg[2].name_len = (uint16_t)names[i].len;
		char shown[32] = "";
		for (size_t k = 0, n = 0; k < names[i].len && n + 3 < sizeof(shown); k++) {
			if (names[i].name[k])
				shown[n++] = names[i].name[k];
			else
				n += (size_t)snprintf(shown + n, sizeof(shown) - n, "\\0");
		}
		snprintf(label, sizeof(label), "region name \"%s\"", shown);
		expect_struct(label, &y, -CKPT_ECORRUPT);
	}
	hshard y;
	hs_copy(&y, x);
	y.reg[2].name_len = 0;
	expect_struct("region name empty", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	memcpy(y.reg[2].name, "alpha", 6);
	expect_struct("two regions named alpha", &y, -CKPT_ECORRUPT);

	hs_copy(&y, x);
	y.reg[0].ndim = 1;
	y.reg[0].global_shape[0] = 10;
	y.reg[0].offsets[0] = 11;
	expect_struct("offset past the global shape", &y, -CKPT_ECORRUPT);
	y.reg[0].offsets[0] = 1;
	y.reg[0].extents[0] = UINT64_MAX;
	expect_struct("extent wrapping past 2^64", &y, -CKPT_ECORRUPT);

	hs_copy(&y, x);
	y.reg[2].chunk_first = 5;
	expect_struct("region chunk range past the table", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	y.reg[0].bytes = 3 * CB;
	y.f.data_bytes += 3 * CB - ALPHA_BYTES;
	expect_struct("region bytes need more chunks", &y, -CKPT_ECORRUPT);
}

static void chunk_cases(const hshard *x)
{
	static const struct { const char *label; int chunk; uint64_t off; } offs[] = {
		{ "chunk offset 0 (in the header)", 0, 0 },
		{ "chunk offset inside the header", 0, 2048 },
		{ "chunk offset not aligned", 0, 4096 + 512 },
		{ "chunk offset at the footer", 2, 0 },
		{ "chunk running into the footer", 1, 1 },
		{ "chunk offset past the end of file", 2, 1ull << 40 },
		{ "chunk offset near 2^64", 0, UINT64_MAX - 4095 },
	};
	for (size_t i = 0; i < CKPT_ARRAY_LEN(offs); i++) {
		hshard y;
	hs_copy(&y, x);
		uint64_t off = offs[i].off;
		if (i == 3)
			off = x->footer_offset;
		else if (i == 4)
			off = x->footer_offset - 4096; /* 34464 bytes from there cross it */
		y.chk[offs[i].chunk].offset = off;
		expect_struct(offs[i].label, &y, -CKPT_ECORRUPT);
	}
	hshard y;
	hs_copy(&y, x);
	y.chk[1].stored_len = 0;
	expect_struct("chunk stored length 0", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	y.chk[0].region = 2;
	expect_struct("chunk names another region", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	y.chk[0].flags = CKPT_CHUNK_ZSTD;
	y.chk[0].stored_len = CB + 4096;
	expect_struct("zstd chunk stored larger than raw", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	y.chk[0].flags = 4u << CKPT_CHUNK_SHUFFLE_SHIFT;
	expect_struct("shuffle without compression", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	y.chk[1].stored_len = 30000;
	expect_struct("raw chunk with stored != raw length", &y, -CKPT_ECORRUPT);
	/* Stored ranges that share bytes: one stored copy read as several (a
	 * small file restored as a huge one). */
	hs_copy(&y, x);
	y.chk[1].offset = y.chk[0].offset;
	expect_struct("two chunks at the same offset", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	y.chk[2].offset = y.chk[0].offset + 4096;
	expect_struct("chunk starting inside another", &y, -CKPT_ECORRUPT);
	hs_copy(&y, x);
	/* alpha's chunks the other way round (out of table order), omega's
	 * inside chunk 1's bytes */
	y.chk[1].offset = CKPT_FMT_HEADER_LEN;
	y.chk[0].offset = CKPT_FMT_HEADER_LEN + CKPT_ALIGN_UP(x->slen[1], CKPT_ALIGN);
	y.chk[2].offset = CKPT_FMT_HEADER_LEN + 4096;
	expect_struct("overlap out of table order", &y, -CKPT_ECORRUPT);
}

/* Stored ranges in any order, disjoint: accepted (a writer may place
 * chunks as they complete). */
static void order_cases(const hshard *x)
{
	hshard y;
	hs_copy(&y, x);
	size_t len;
	/* alpha's two chunks stored the other way round, in the same area */
	uint64_t a = CKPT_FMT_HEADER_LEN, b = a + CKPT_ALIGN_UP(x->slen[1], CKPT_ALIGN);
	y.chk[1].offset = y.where[1] = a;
	y.chk[0].offset = y.where[0] = b;
	uint8_t *buf = hs_encode(&y, &len);
	expect_accept("chunks stored out of table order", buf, len);
	free(buf);
}

/* A footer of 2^18 regions (no chunks), names distinct but for the last:
 * the duplicate is found, and the valid one opens, in n log n (the check
 * was once quadratic: 60,000 regions took 45 s). */
static void many_regions_case(void)
{
	const uint32_t n = 1u << 18;
	hshard y;
	memset(&y, 0, sizeof(y));
	y.h.version = 7;
	y.h.world_size = 1;
	snprintf(y.h.job, sizeof(y.h.job), "hostile");
	ckpt_fmt_region *reg = calloc(n, sizeof(*reg));
	T_ASSERT(reg);
	for (uint32_t i = 0; i < n; i++) {
		char nm[16];
		snprintf(nm, sizeof(nm), "r%07u", (i * 2654435761u) % n); /* distinct, not in order */
		set_region(&reg[i], nm, 0, 0, 0);
	}
	y.footer_offset = CKPT_FMT_HEADER_LEN;
	y.f.region_count = n;
	y.f.chunk_bytes = CB;
	y.f.regions = reg;
	y.f.chunks = y.chk;
	uint64_t t0 = t_now_ms();
	size_t len;
	uint8_t *buf = hs_encode(&y, &len);
	expect_accept("2^18 regions", buf, len);
	free(buf);
	memcpy(reg[n - 1].name, reg[n / 2].name, sizeof(reg[0].name));
	expect_struct("2^18 regions, one name twice", &y, -CKPT_ECORRUPT);
	printf("     (2^18 regions: encoded and opened three times in %llu ms)\n", (unsigned long long)(t_now_ms() - t0));
	free(reg);
}

/* A region whose byte count makes (bytes + chunk_bytes - 1) wrap: the
 * chunk count it needs comes out as 0, so it is accepted with no chunks. */
static void size_wrap_cases(void)
{
	static const uint64_t sizes[] = { UINT64_MAX, UINT64_MAX - 4095, UINT64_MAX - CB + 2 };
	for (size_t i = 0; i < CKPT_ARRAY_LEN(sizes); i++) {
		hshard y;
		memset(&y, 0, sizeof(y));
		y.h.version = 7;
		y.h.world_size = 1;
		snprintf(y.h.job, sizeof(y.h.job), "hostile");
		set_region(&y.reg[0], "huge", sizes[i], 0, 0);
		y.footer_offset = CKPT_FMT_HEADER_LEN;
		y.f.region_count = 1;
		y.f.chunk_bytes = CB;
		y.f.data_bytes = sizes[i];
		y.f.regions = y.reg;
		y.f.chunks = y.chk;
		char label[96];
		snprintf(label, sizeof(label), "region of %llu bytes with no chunks", (unsigned long long)sizes[i]);
		expect_struct(label, &y, -CKPT_ECORRUPT);
	}
}

/* ---- chunk data, through ckpt__shard_read ---- */

struct sink_arg {
	uint64_t got[3];
	int mismatch;
};

static int cmp_sink(void *arg, uint32_t ri, uint64_t off, const void *data, size_t len)
{
	struct sink_arg *a = arg;
	const uint8_t *want = ri == 0 ? alpha_raw : ri == 2 ? omega_raw : NULL;
	uint64_t size = ri == 0 ? ALPHA_BYTES : ri == 2 ? OMEGA_BYTES : 0;
	if (!want || off > size || len > size - off || memcmp(want + off, data, len))
		a->mismatch = 1;
	else
		a->got[ri] += len;
	return 0;
}

/* Writes buf and reads it back through the reader; returns its result. */
static int read_back(const char *label, const uint8_t *buf, size_t len, char *why, size_t cap, int *ok)
{
	const char *path = write_file("read.ckpt", buf, len);
	ckpt_shard s;
	int r = ckpt__shard_open(path, &s, why, cap);
	CHECK(r == 0, "%s: refused at open: %s", label, why);
	if (r < 0)
		return r;
	struct sink_arg a = { { 0 }, 0 };
	ckpt_read_opts o = { .depth = 4, .direct = 0, .why = why, .whycap = cap };
	r = ckpt__shard_read(path, &s, &o, cmp_sink, &a);
	*ok = !a.mismatch && a.got[0] == ALPHA_BYTES && a.got[2] == OMEGA_BYTES;
	ckpt__shard_close(&s);
	return r;
}

static void expect_read_error(const char *label, const uint8_t *buf, size_t len, const char *needle)
{
	char why[512] = "";
	int ok;
	int r = read_back(label, buf, len, why, sizeof(why), &ok);
	CHECK(r == -CKPT_ECORRUPT, "%s: read gave %d (%s), expected corruption", label, r, ckpt_strerror(r));
	CHECK(!needle || strstr(why, needle), "%s: reason '%s' does not name '%s'", label, why, needle);
	if (r == -CKPT_ECORRUPT)
		printf("ok   %-44s %s\n", label, why);
}

static void data_cases(void)
{
	char why[512];
	int ok;
	for (int z = 0; z < 2; z++) {
		hshard x;
		hs_init(&x, z);
		size_t len;
		uint8_t *buf = hs_encode(&x, &len);
		why[0] = 0;
		int r = read_back(z ? "valid shard (zstd)" : "valid shard", buf, len, why, sizeof(why), &ok);
		CHECK(r == 0 && ok, "valid shard (zstd %d) reads back wrong: %d %s", z, r, why);
		if (r == 0 && ok)
			printf("ok   %-44s reads back intact\n", z ? "valid shard (zstd)" : "valid shard");
		if (!z) {
			buf[x.where[1] + 100] ^= 1;
			expect_read_error("chunk data byte flipped", buf, len, "region 'alpha' chunk 1");
		} else {
			memset(buf + x.where[2] + 4, 0x55, 16);
			expect_read_error("zstd frame damaged", buf, len, "region 'omega' chunk 0");
		}
		free(buf);
		x.chk[0].checksum ^= 1;
		buf = hs_encode(&x, &len);
		expect_read_error("chunk checksum field wrong", buf, len, "checksum mismatch");
		free(buf);
		hs_free(&x);
	}
	hshard x;
	hs_init(&x, 2);
	size_t len;
	uint8_t *buf = hs_encode(&x, &len);
	expect_read_error("zstd frame of the wrong length", buf, len, "region 'omega'");
	free(buf);
	hs_free(&x);
}

/* ---- LMDB index records and keys ---- */

static void expect_index(const char *label, int r, int want)
{
	CHECK(want ? r == want : r == 0, "%s: got %d (%s), expected %d", label, r, ckpt_strerror(r), want);
	if (want ? r == want : r == 0)
		printf("ok   %-44s %s\n", label, r ? ckpt_strerror(r) : "accepted");
}

/* Not a shard file at all: a FIFO must not block the open, a symlink to a
 * valid shard is not followed, a directory is refused. */
static void file_kind_cases(void)
{
	hshard x;
	hs_init(&x, 0);
	size_t len;
	uint8_t *buf = hs_encode(&x, &len);
	char real[700], path[700], why[256];
	snprintf(real, sizeof(real), "%s", write_file("real.ckpt", buf, len));
	free(buf);
	hs_free(&x);
	ckpt_shard s;
	T_OK(ckpt__shard_open(real, &s, why, sizeof(why)));
	ckpt__shard_close(&s);
	snprintf(path, sizeof(path), "%s/link.ckpt", dir);
	T_ASSERT(symlink(real, path) == 0);
	int r = ckpt__shard_open(path, &s, why, sizeof(why));
	CHECK(r == -CKPT_ECORRUPT, "symlink to a shard: %d (%s)", r, why);
	if (r == 0)
		ckpt__shard_close(&s);
	snprintf(path, sizeof(path), "%s/fifo.ckpt", dir);
	T_ASSERT(mkfifo(path, 0600) == 0);
	r = ckpt__shard_open(path, &s, why, sizeof(why));
	CHECK(r == -CKPT_ECORRUPT, "FIFO: %d (%s)", r, why);
	snprintf(path, sizeof(path), "%s/dir.ckpt", dir);
	T_ASSERT(mkdir(path, 0700) == 0);
	r = ckpt__shard_open(path, &s, why, sizeof(why));
	CHECK(r < 0, "directory: accepted");
	printf("ok   %-44s refused\n", "symlink, FIFO and directory as shard files");
}

static void index_cases(void)
{
	ckpt_idx_version v = { .state = CKPT_STATE_COMMITTED, .world_size = 2, .shards_done = 2, .lineage = 9 };
	ckpt_idx_shard sh = { .tiers = CKPT_TIER_LOCAL_DISK, .bytes = 1, .lineage = 9 };
	uint8_t vb[CKPT_IDX_VERSION_REC_LEN + 8], sb[CKPT_IDX_SHARD_REC_LEN + 8];
	ckpt_idx_version vo;
	ckpt_idx_shard so;
	ckpt__idx_version_encode(vb, &v);
	ckpt__idx_shard_encode(sb, &sh);
	size_t vl = CKPT_IDX_VERSION_REC_LEN, sl = CKPT_IDX_SHARD_REC_LEN;
	expect_index("version record", ckpt__idx_version_decode(vb, vl, &vo), 0);
	expect_index("version record without lineage (older)", ckpt__idx_version_decode(vb, vl - 8, &vo), 0);
	/* Neither an old record nor a new one: the lineage is cut. */
	expect_index("version record with a cut lineage", ckpt__idx_version_decode(vb, vl - 4, &vo), -CKPT_ECORRUPT);
	expect_index("version record of 4 bytes", ckpt__idx_version_decode(vb, 4, &vo), -CKPT_ECORRUPT);
	expect_index("shard record", ckpt__idx_shard_decode(sb, sl, &so), 0);
	expect_index("shard record without lineage (older)", ckpt__idx_shard_decode(sb, sl - 8, &so), 0);
	expect_index("shard record with a cut lineage", ckpt__idx_shard_decode(sb, sl - 4, &so), -CKPT_ECORRUPT);
	uint8_t bad[CKPT_IDX_VERSION_REC_LEN];
	memcpy(bad, vb, sizeof(bad));
	ckpt__put_le32(bad, 2);
	expect_index("version record of a newer schema", ckpt__idx_version_decode(bad, vl, &vo), -CKPT_EFORMAT);
	ckpt__put_le32(bad, 0);
	expect_index("version record version 0", ckpt__idx_version_decode(bad, vl, &vo), -CKPT_ECORRUPT);
	memcpy(bad, vb, sizeof(bad));
	ckpt__put_le32(bad + 4, 9);
	expect_index("version record in state 9", ckpt__idx_version_decode(bad, vl, &vo), -CKPT_ECORRUPT);
	memcpy(bad, vb, sizeof(bad));
	ckpt__put_le32(bad + 12, 3);
	expect_index("version record with 3/2 shards", ckpt__idx_version_decode(bad, vl, &vo), -CKPT_ECORRUPT);
	memcpy(bad, sb, sl);
	ckpt__put_le32(bad + 4, 0x10);
	expect_index("shard record on an unknown tier", ckpt__idx_shard_decode(bad, sl, &so), -CKPT_ECORRUPT);

	uint8_t k[CKPT_IDX_KEY_MAX];
	char job[65];
	uint64_t ver;
	uint32_t rank;
	int hr;
	size_t kl = ckpt__idx_key(k, "abcde", 42, 1, 3);
	expect_index("shard key", ckpt__idx_key_decode(k, kl, job, &ver, &rank, &hr), 0);
	expect_index("shard key without its last byte", ckpt__idx_key_decode(k, kl - 1, job, &ver, &rank, &hr),
	             -CKPT_ECORRUPT);
	k[3] = 0; /* "ab\0de" */
	expect_index("key whose job id holds a NUL", ckpt__idx_key_decode(k, kl, job, &ver, &rank, &hr),
	             -CKPT_ECORRUPT);
	kl = ckpt__idx_key(k, "../ev", 42, 0, 0);
	expect_index("key with job id \"../ev\"", ckpt__idx_key_decode(k, kl, job, &ver, &rank, &hr),
	             -CKPT_ECORRUPT);
	k[0] = 65;
	expect_index("key with job id length 65", ckpt__idx_key_decode(k, kl, job, &ver, &rank, &hr),
	             -CKPT_ECORRUPT);
}

int main(void)
{
	t_fill(alpha_raw, sizeof(alpha_raw), 1);
	for (size_t i = 0; i < sizeof(omega_raw); i++)
		omega_raw[i] = (uint8_t)"omega region, compressible. "[i % 28];
	snprintf(dir, sizeof(dir), "%s", t_tmpdir("hostile"));

	hshard x;
	hs_init(&x, 0);
	garbage_cases();
	length_cases(&x);
	location_cases(&x);
	count_cases(&x);
	header_cases(&x);
	region_cases(&x);
	chunk_cases(&x);
	order_cases(&x);
	many_regions_case();
	size_wrap_cases();
	hs_free(&x);
	data_cases();
	file_kind_cases();
	index_cases();

	t_rmrf(dir);
	if (fails) {
		fprintf(stderr, "%d hostile-input checks failed\n", fails);
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}
