#include "ckpt_kernels.h"

#include <zstd.h>

size_t ckpt_kern_compress_bound(size_t len)
{
	return ZSTD_compressBound(len);
}

size_t ckpt_kern_compress(void *cctx, int level, void *dst, size_t cap, const void *src,
                          size_t len, unsigned elem, void *scratch)
{
	if (len == 0)
		return 0;
	const void *in = src;
	if (elem > 1) {
		ckpt_kern_shuffle(scratch, src, len, elem);
		in = scratch;
	}
	size_t r = ZSTD_compressCCtx(cctx, dst, cap, in, len, level);
	if (ZSTD_isError(r))
		return 0;
	/* Storing compressed data only pays when it saves at least an eighth:
	 * below that the decompression time on restore costs more than the
	 * bytes saved on disk. */
	if (r > len - len / 8)
		return 0;
	return r;
}

int ckpt_kern_decompress(void *dctx, void *dst, size_t raw_len, const void *src, size_t len,
                         unsigned elem, void *scratch)
{
	void *out = elem > 1 ? scratch : dst;
	unsigned long long fsize = ZSTD_getFrameContentSize(src, len);
	if (fsize == ZSTD_CONTENTSIZE_ERROR || (fsize != ZSTD_CONTENTSIZE_UNKNOWN && fsize != raw_len))
		return -1;
	size_t r = ZSTD_decompressDCtx(dctx, out, raw_len, src, len);
	if (ZSTD_isError(r) || r != raw_len)
		return -1;
	if (elem > 1)
		ckpt_kern_unshuffle(dst, scratch, raw_len, elem);
	return 0;
}
