/* Fuzz target for the safetensors header parser of `ckpt import`
 * (tools/ckpt/safetensors.c): any file is either refused with a reason or
 * gives tensors that exactly tile the data section, each holding the bytes
 * its shape needs, with valid names; and a header built back from an
 * accepted one parses to the same tensors.
 *
 * With CKPT_FUZZING this is a libFuzzer target; without it fuzz_driver.c
 * replays corpus/safetensors and fz_mutations() below. */
#include "fuzz_common.h"
#include "fuzz_driver.h"
#include "safetensors.h"

static void run_one(const uint8_t *data, size_t size)
{
	char why[256];
	uint64_t hlen;
	st_file f, g;
	memset(why, 'x', sizeof(why));
	if (st_header_len(data, size, size, &hlen, why, sizeof(why)) < 0) {
		FZ_CHECK(memchr(why, '\0', sizeof(why)) && why[0], "length refused without a reason");
		return;
	}
	FZ_CHECK(hlen >= 1 && hlen <= size - 8, "accepted header length %llu of a %zu-byte file",
	         (unsigned long long)hlen, size);
	memset(why, 'x', sizeof(why));
	if (st_header_parse((const char *)data + 8, hlen, size, &f, why, sizeof(why)) < 0) {
		FZ_CHECK(memchr(why, '\0', sizeof(why)) && why[0], "header refused without a reason");
		return;
	}
	uint64_t at = 0;
	for (size_t i = 0; i < f.n; i++) {
		const st_tensor *t = &f.t[i];
		uint64_t b = ckpt_dtype_size(t->dtype);
		for (uint32_t d = 0; d < t->ndim; d++)
			b *= t->shape[d];
		FZ_CHECK(t->begin == at && t->end - t->begin == b, "tensor %zu at [%llu, %llu) does not follow %llu", i,
		         (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)at);
		FZ_CHECK(ckpt__region_name_valid(t->name, strlen(t->name)) == 0, "accepted name '%s'", t->name);
		at = t->end;
	}
	FZ_CHECK(at == f.data_len, "tensors end at %llu, the data at %llu", (unsigned long long)at,
	         (unsigned long long)f.data_len);
	size_t blen;
	uint8_t *h = st_header_build(f.t, f.n, NULL, 0, &blen);
	FZ_CHECK(h != NULL, "could not build a header");
	if (h) {
		uint64_t hl2 = ckpt__get_le64(h);
		int r = st_header_parse((const char *)h + 8, hl2, hl2 + 8 + f.data_len, &g, why, sizeof(why));
		FZ_CHECK(r == 0, "its own header was refused: %s", why);
		FZ_CHECK(r != 0 || g.n == f.n, "round trip: %zu tensors, then %zu", f.n, g.n);
		for (size_t i = 0; r == 0 && i < g.n && i < f.n; i++)
			FZ_CHECK(!strcmp(f.t[i].name, g.t[i].name) && f.t[i].dtype == g.t[i].dtype &&
			         f.t[i].ndim == g.t[i].ndim && f.t[i].begin == g.t[i].begin && f.t[i].end == g.t[i].end &&
			         !memcmp(f.t[i].shape, g.t[i].shape, sizeof(f.t[i].shape)),
			         "round trip changed tensor '%s'", f.t[i].name);
		if (r == 0)
			st_file_free(&g);
		free(h);
	}
	st_file_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_one(data, size);
	return 0;
}

#ifndef CKPT_FUZZING
const char fz_corpus_name[] = "safetensors";

/* Every truncation, every single-bit flip, and at every offset the bytes
 * that change JSON's structure or a number. */
uint64_t fz_mutations(const uint8_t *data, size_t size)
{
	static const uint8_t pokes[] = { '"', '{', '}', '[', ']', ',', ':', '-', '0', '9', '\\', ' ', 0x00, 0x80, 0xff };
	return fz_text_mutations(data, size, 0, pokes, sizeof(pokes));
}
#endif
