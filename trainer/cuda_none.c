/* CUDA mode in a build without CUDA: say so, and skip (exit 77). */
#include "trainer.h"

#include <stdio.h>

int tr_cuda_probe(int *ndev, char *why, size_t cap)
{
	*ndev = 0;
	snprintf(why, cap, "this build has no CUDA support (no CUDA compiler at configure time)");
	return 0;
}

int tr_rank_cuda(const tr_opts *o)
{
	(void)o;
	fprintf(stderr, "trainer: this build has no CUDA support\n");
	return TR_EXIT_SKIP;
}
