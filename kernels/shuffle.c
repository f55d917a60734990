#include "ckpt_kernels.h"

#include <string.h>

void ckpt_kern_shuffle(void *dst, const void *src, size_t len, unsigned elem)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	if (elem <= 1) {
		memcpy(d, s, len);
		return;
	}
	size_t n = len / elem;
	for (unsigned k = 0; k < elem; k++) {
		uint8_t *plane = d + (size_t)k * n;
		const uint8_t *in = s + k;
		for (size_t i = 0; i < n; i++)
			plane[i] = in[i * elem];
	}
	memcpy(d + n * elem, s + n * elem, len - n * elem);
}

void ckpt_kern_unshuffle(void *dst, const void *src, size_t len, unsigned elem)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	if (elem <= 1) {
		memcpy(d, s, len);
		return;
	}
	size_t n = len / elem;
	for (unsigned k = 0; k < elem; k++) {
		const uint8_t *plane = s + (size_t)k * n;
		uint8_t *out = d + k;
		for (size_t i = 0; i < n; i++)
			out[i * elem] = plane[i];
	}
	memcpy(d + n * elem, s + n * elem, len - n * elem);
}
