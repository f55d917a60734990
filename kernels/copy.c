#include "ckpt_kernels.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>

void ckpt_kern_copy_stream(void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	if (len < 4096) { /* not worth it: the lines are in the cache soon anyway */
		memcpy(d, s, len);
		return;
	}
	size_t head = (size_t)(-(uintptr_t)d & 15);
	memcpy(d, s, head);
	d += head;
	s += head;
	len -= head;
	size_t body = len & ~(size_t)63;
	for (size_t i = 0; i < body; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
		_mm_stream_si128((__m128i *)(d + i), a);
		_mm_stream_si128((__m128i *)(d + i + 16), b);
		_mm_stream_si128((__m128i *)(d + i + 32), c);
		_mm_stream_si128((__m128i *)(d + i + 48), e);
	}
	memcpy(d + body, s + body, len - body);
	/* Streamed stores are weakly ordered: visible before whoever hears
	 * that the copy is done reads the bytes. */
	_mm_sfence();
}
#else
void ckpt_kern_copy_stream(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}
#endif
