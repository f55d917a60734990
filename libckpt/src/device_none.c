/* A build without CUDA: no device region can exist. */
#include "device.h"

#include <errno.h>

int ckpt__dev_available(void) { return 0; }
int ckpt__dev_open(ckpt_dev **out, void *pool, size_t pool_bytes, uint32_t nslots, const ckpt_logger *lg)
{
	(void)pool; (void)pool_bytes; (void)nslots; (void)lg;
	*out = NULL;
	return -ENOTSUP;
}
void ckpt__dev_close(ckpt_dev *d) { (void)d; }
void ckpt__dev_pool_release(ckpt_dev *d) { (void)d; }
int ckpt__dev_pool_attach(ckpt_dev *d, void *pool, size_t pool_bytes, uint32_t nslots)
{
	(void)d; (void)pool; (void)pool_bytes; (void)nslots;
	return -ENOTSUP;
}
int ckpt__dev_check_ptr(ckpt_dev *d, const void *p, size_t n) { (void)d; (void)p; (void)n; return -ENOTSUP; }
int ckpt__dev_region_init(ckpt_dev *d, ckpt_dev_region *r, uint64_t b, uint64_t c)
{
	(void)d; (void)r; (void)b; (void)c;
	return -ENOTSUP;
}
void ckpt__dev_region_fini(ckpt_dev *d, ckpt_dev_region *r) { (void)d; (void)r; }
int ckpt__dev_stream_set(ckpt_dev *d, void *s) { (void)d; (void)s; return -ENOTSUP; }
int ckpt__dev_save_point(ckpt_dev *d, void *const *p, const uint64_t *b, ckpt_dev_region *const *r,
                         uint32_t n, uint64_t c, int k)
{
	(void)d; (void)p; (void)b; (void)r; (void)n; (void)c; (void)k;
	return -ENOTSUP;
}
int ckpt__dev_copy_chunk(ckpt_dev *d, int slot, void *dst, const void *src, size_t len,
                         const ckpt_dev_region *r, uint32_t k)
{
	(void)d; (void)slot; (void)dst; (void)src; (void)len; (void)r; (void)k;
	return -ENOTSUP;
}
int ckpt__dev_save_end(ckpt_dev *d, int wait) { (void)d; (void)wait; return 0; }
int ckpt__dev_slot_wait(ckpt_dev *d, int slot, uint64_t *s) { (void)d; (void)slot; (void)s; return -ENOTSUP; }
int ckpt__dev_fence(ckpt_dev *d, void *const *p, const uint64_t *b, const char *const *nm,
                    ckpt_dev_region *const *r, uint32_t n, uint64_t c, int k)
{
	(void)d; (void)p; (void)b; (void)nm; (void)r; (void)n; (void)c; (void)k;
	return 0;
}
int ckpt__dev_h2d(ckpt_dev *d, void *dst, const void *src, size_t len)
{
	(void)d; (void)dst; (void)src; (void)len;
	return -ENOTSUP;
}
