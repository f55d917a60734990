#include "backend.h"

#include <errno.h>
#include <string.h>

static const ckpt_backend_ops *const backends[] = {
	&ckpt_backend_uring,
	&ckpt_backend_psync,
};

const ckpt_backend_ops *ckpt_backend_find(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

int ckpt_backend_open(const char *name, const ckpt_backend_params *p, ckpt_backend **out,
                      int *fell_back, int *uring_err)
{
	*fell_back = 0;
	*uring_err = 0;
	if (name && *name && strcmp(name, "auto")) {
		const ckpt_backend_ops *ops = ckpt_backend_find(name);
		if (!ops)
			return -ENOENT;
		if (ops->version != CKPT_BACKEND_OPS_VERSION)
			return -ENOTSUP;
		return ops->open(p, out);
	}
	int r = ckpt_backend_uring.open(p, out);
	if (r == 0)
		return 0;
	*fell_back = 1;
	*uring_err = r;
	return ckpt_backend_psync.open(p, out);
}
