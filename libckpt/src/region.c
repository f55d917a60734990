/* Regions: what a save copies and a restore fills, host or CUDA, and the
 * device's fence. */
#include "ctx.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

void ckpt_region_desc_init(ckpt_region_desc *d, const char *name, void *ptr, uint64_t bytes)
{
	memset(d, 0, sizeof(*d));
	d->size = sizeof(*d);
	d->name = name;
	d->ptr = ptr;
	d->bytes = bytes;
	d->dtype = CKPT_DTYPE_BYTES;
	d->device = CKPT_DEVICE_HOST;
}

/* fd >= 0: a file region (its bytes at fd_off of fd), d->ptr unused. */
static int region_add(ckpt_ctx *ctx, const ckpt_region_desc *d, int fd, uint64_t fd_off)
{
	if (!ctx || !d || d->size < sizeof(*d))
		return -EINVAL;
	size_t nl = d->name ? strnlen(d->name, CKPT_MAX_NAME + 1) : 0;
	/* Names are decided here, once: every tool prints them, and a name a
	 * terminal acts on, or that is not UTF-8, never reaches a file. */
	if (ckpt__region_name_writable(d->name, nl) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "region name invalid: 1-255 bytes of well-formed UTF-8, no control "
		      "characters, no '/' or '\\', not '.' or '..'");
		return -CKPT_ENAME;
	}
	for (uint32_t i = 0; i < ctx->nregions; i++)
		if (!strcmp(ctx->regions[i].name, d->name)) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s' already registered", d->name);
			return -CKPT_ENAME;
		}
	if (d->device != CKPT_DEVICE_HOST && d->device != CKPT_DEVICE_CUDA)
		return -EINVAL;
	if (d->device == CKPT_DEVICE_CUDA && !ctx->dev) {
		int err = ckpt__dev_open(&ctx->dev, ctx->pool.base, ctx->pool.map_bytes, ctx->pool.nslots, &ctx->log);
		if (err < 0) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': CUDA regions need %s", d->name,
			      err == -ENOTSUP ? "a build with CUDA" : "a usable CUDA device");
			return err;
		}
		ckpt__dev_stream_set(ctx->dev, ctx->cuda_stream);
	}
	if (d->device == CKPT_DEVICE_CUDA && ckpt__dev_check_ptr(ctx->dev, d->ptr, d->bytes) < 0) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': not device memory of the current CUDA device", d->name);
		return -EINVAL;
	}
	if (ckpt_dtype_size(d->dtype) == 0 || d->ndim > CKPT_MAX_DIMS || (fd < 0 && d->bytes && !d->ptr))
		return -EINVAL;
	if (d->ndim) {
		uint64_t n = 1;
		for (uint32_t k = 0; k < d->ndim; k++) {
			if (d->offsets[k] > d->global_shape[k] || d->extents[k] > d->global_shape[k] - d->offsets[k]) {
				LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': dim %u: offset+extent beyond global shape",
				      d->name, k);
				return -EINVAL;
			}
			if (d->extents[k] && n > UINT64_MAX / d->extents[k])
				return -EINVAL;
			n *= d->extents[k];
		}
		if (d->dtype != CKPT_DTYPE_BYTES && n * ckpt_dtype_size(d->dtype) != d->bytes) {
			LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': %llu bytes but extents give %llu elements of %zu",
			      d->name, (unsigned long long)d->bytes, (unsigned long long)n, ckpt_dtype_size(d->dtype));
			return -EINVAL;
		}
	}
	if (ctx->nregions == ctx->cap_regions) {
		uint32_t nc = ctx->cap_regions ? ctx->cap_regions * 2 : 16;
		ckpt_region *r = realloc(ctx->regions, nc * sizeof(*r));
		if (!r)
			return -ENOMEM;
		ctx->regions = r;
		ctx->cap_regions = nc;
	}
	ckpt_region *r = &ctx->regions[ctx->nregions];
	memset(r, 0, sizeof(*r));
	r->name = strdup(d->name);
	if (!r->name)
		return -ENOMEM;
	r->name_len = nl;
	r->ptr = fd < 0 ? d->ptr : NULL;
	r->fd = fd;
	r->fd_off = fd_off;
	r->bytes = d->bytes;
	r->dtype = d->dtype;
	r->device = d->device;
	r->ndim = d->ndim;
	memcpy(r->global_shape, d->global_shape, sizeof(r->global_shape));
	memcpy(r->offsets, d->offsets, sizeof(r->offsets));
	memcpy(r->extents, d->extents, sizeof(r->extents));
	if (d->device == CKPT_DEVICE_CUDA) {
		int err = ckpt__dev_region_init(ctx->dev, &r->dev, r->bytes, ctx->cfg.chunk_bytes);
		if (err < 0) {
			free(r->name);
			return err;
		}
		ctx->ndev_regions++;
	}
	ctx->nregions++;
	return 0;
}

int ckpt_region_add(ckpt_ctx *ctx, const ckpt_region_desc *d)
{
	return region_add(ctx, d, -1, 0);
}

int ckpt_region_add_file(ckpt_ctx *ctx, const char *name, int fd, uint64_t offset, uint64_t bytes)
{
	struct stat st;
	if (!ctx || !name || fd < 0)
		return fd < 0 && ctx && name ? -EBADF : -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || offset > UINT64_MAX - bytes || offset + bytes > (uint64_t)INT64_MAX) {
		LOG_E(&ctx->log, CKPT_NO_VERSION, "region '%s': %s", name,
		      S_ISREG(st.st_mode) ? "offset + bytes too large" : "not a regular file");
		return -EINVAL;
	}
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, name, NULL, bytes);
	return region_add(ctx, &d, fd, offset);
}

int ckpt_region_remove(ckpt_ctx *ctx, const char *name)
{
	if (!ctx || !name)
		return -EINVAL;
	uint32_t i;
	for (i = 0; i < ctx->nregions; i++)
		if (!strcmp(ctx->regions[i].name, name))
			break;
	if (i == ctx->nregions)
		return -ENOENT;
	ckpt_region *r = &ctx->regions[i];
	if (r->device == CKPT_DEVICE_CUDA) {
		/* A lazy save's device copies may still read it. */
		int err = ckpt_fence(ctx);
		if (err < 0)
			return err;
		ckpt__dev_region_fini(ctx->dev, &r->dev);
		ctx->ndev_regions--;
	}
	free(r->name);
	/* Order is the footer's region order: keep it. */
	memmove(r, r + 1, (ctx->nregions - i - 1) * sizeof(*r));
	ctx->nregions--;
	return 0;
}

/* ------------------------------------------------------------- CUDA */

int ckpt_cuda_available(void)
{
	return ckpt__dev_available();
}

int ckpt_cuda_stream_set(ckpt_ctx *ctx, void *stream)
{
	if (!ctx)
		return -EINVAL;
	int err = ckpt__dev_stream_set(ctx->dev, stream);
	if (err == 0)
		ctx->cuda_stream = stream;
	return err;
}

/* The CUDA regions as parallel arrays, for the device layer. */
int ckpt__dev_regions(ckpt_ctx *ctx, void **ptrs, uint64_t *bytes, const char **names,
                      ckpt_dev_region **regs)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < ctx->nregions; i++) {
		ckpt_region *r = &ctx->regions[i];
		if (r->device != CKPT_DEVICE_CUDA)
			continue;
		ptrs[n] = r->ptr;
		bytes[n] = r->bytes;
		names[n] = r->name;
		regs[n] = &r->dev;
		n++;
	}
	return (int)n;
}

int ckpt_fence(ckpt_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (!ctx->dev)
		return 0;
	uint32_t n = ctx->ndev_regions;
	void **ptrs = calloc(n + 1, sizeof(*ptrs));
	uint64_t *bytes = calloc(n + 1, sizeof(*bytes));
	const char **names = calloc(n + 1, sizeof(*names));
	ckpt_dev_region **regs = calloc(n + 1, sizeof(*regs));
	int err = -ENOMEM;
	if (ptrs && bytes && names && regs) {
		ckpt__dev_regions(ctx, ptrs, bytes, names, regs);
		err = ckpt__dev_fence(ctx->dev, ptrs, bytes, names, regs, n, ctx->cfg.chunk_bytes,
		                      ctx->cfg.lazy_check);
	}
	free(ptrs);
	free(bytes);
	free(names);
	free(regs);
	return err;
}
