#include "ckpt_kernels.h"

#include <string.h>

void ckpt_kern_xor(void *dst, const void *a, const void *b, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *x = a, *y = b;
	size_t i = 0;
	/* memcpy keeps the word loop free of alignment assumptions. */
	for (; i + 8 <= len; i += 8) {
		uint64_t u, v;
		memcpy(&u, x + i, 8);
		memcpy(&v, y + i, 8);
		u ^= v;
		memcpy(d + i, &u, 8);
	}
	for (; i < len; i++)
		d[i] = x[i] ^ y[i];
}
