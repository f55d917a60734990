/* What both kinds of rank share: the checkpoint context and its regions. */
#include "trainer.h"
#include "ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tr_ckpt_open(const tr_opts *o, uint64_t state_bytes, ckpt_ctx **out)
{
	ckpt_config cfg;
	int err = ckpt_config_init(&cfg);
	if (err < 0) {
		fprintf(stderr, "trainer: rank %d: configuration: %s\n", o->rank, ckpt_strerror(err));
		return err;
	}
	cfg.job_id = o->job;
	cfg.rank = (uint32_t)o->rank;
	cfg.world_size = o->ranks;
	cfg.root = o->root;
	if (o->incarnation)
		cfg.incarnation = o->incarnation;
	/* The state is small: small chunks, and a pool for two saves in flight
	 * plus one chunk per region, unless the environment says otherwise. */
	if (!getenv("CKPT_CHUNK_BYTES"))
		cfg.chunk_bytes = 256 << 10;
	if (!getenv("CKPT_STAGING_BYTES")) {
		uint64_t cb = cfg.chunk_bytes;
		cfg.staging_bytes = (2 * ((state_bytes + cb - 1) / cb) + 8) * cb;
	}
	err = ckpt_ctx_open(&cfg, out);
	if (err < 0)
		fprintf(stderr, "trainer: rank %d: ckpt_ctx_open(root %s, job %s): %s\n", o->rank,
		        o->root, o->job, ckpt_strerror(err));
	return err;
}

int tr_ckpt_add_f32(ckpt_ctx *ctx, const char *name, float *p, size_t off, size_t n,
                    size_t total, int dev)
{
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, name, p, (uint64_t)n * sizeof(float));
	d.dtype = CKPT_DTYPE_F32;
	d.device = (ckpt_device)dev;
	d.ndim = 1;
	d.global_shape[0] = total;
	d.offsets[0] = n ? off : 0; /* an empty shard sits anywhere */
	d.extents[0] = n;
	int err = ckpt_region_add(ctx, &d);
	if (err < 0)
		fprintf(stderr, "trainer: region %s: %s\n", name, ckpt_strerror(err));
	return err;
}

int tr_ckpt_add_blob(ckpt_ctx *ctx, const char *name, void *p, size_t bytes, int dtype,
                     size_t count)
{
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, name, p, bytes);
	d.dtype = (ckpt_dtype)dtype;
	if (dtype != CKPT_DTYPE_BYTES) {
		d.ndim = 1;
		d.global_shape[0] = d.extents[0] = count;
	}
	int err = ckpt_region_add(ctx, &d);
	if (err < 0)
		fprintf(stderr, "trainer: region %s: %s\n", name, ckpt_strerror(err));
	return err;
}

int tr_ckpt_save(ckpt_ctx *ctx, uint64_t version, uint32_t flags, ckpt_handle **last, int rank)
{
	ckpt_handle *h = NULL;
	int err = ckpt_save(ctx, version, flags, &h);
	if (err == -EEXIST)
		return 0; /* committed by an earlier run of the job: the same state */
	if (err < 0) {
		fprintf(stderr, "trainer: rank %d: save of step %llu: %s\n", rank,
		        (unsigned long long)version, ckpt_strerror(err));
		return err;
	}
	/* The previous save's error shows up here rather than never. */
	err = tr_ckpt_wait(last, rank);
	*last = h;
	return err;
}

int tr_ckpt_wait(ckpt_handle **h, int rank)
{
	if (!*h)
		return 0;
	ckpt_status st = { .size = sizeof(st) };
	int err = ckpt_handle_wait(*h, CKPT_TIER_LOCAL_DISK, -1, &st);
	ckpt_handle_free(*h);
	*h = NULL;
	if (err < 0)
		fprintf(stderr, "trainer: rank %d: save of step %llu failed: %s\n", rank,
		        (unsigned long long)st.version, ckpt_strerror(err));
	return err;
}

int tr_ckpt_step(ckpt_ctx *ctx, tr_comm *comm, uint64_t t, uint32_t world, int rank)
{
	int act = ckpt_step(ctx, t);
	if (act < 0) {
		fprintf(stderr, "trainer: rank %d: ckpt_step: %s\n", rank, ckpt_strerror(act));
		return act;
	}
	/* An all-reduce as a reduce-scatter of one float per rank: every rank
	 * gets the sum of the flags (small integers: exact in a float). */
	float flag = act == CKPT_STEP_EXIT ? 1024.0f : act == CKPT_STEP_SAVE ? 1.0f : 0.0f, sum = 0.0f;
	float *in = malloc(world * sizeof(float));
	if (!in)
		return -ENOMEM;
	for (uint32_t r = 0; r < world; r++)
		in[r] = flag;
	int err = tr_comm_reduce_scatter(comm, in, &sum, 1);
	free(in);
	if (err < 0)
		return err;
	return sum >= 1024.0f ? CKPT_STEP_EXIT : sum >= 1.0f ? CKPT_STEP_SAVE : CKPT_STEP_CONTINUE;
}

int tr_ckpt_saved_world(ckpt_ctx *ctx, uint64_t version, uint32_t *world)
{
	size_t n = 0;
	int err = ckpt_versions_list(ctx, NULL, 0, &n);
	if (err < 0)
		return err;
	ckpt_version_info *vi = calloc(n + 1, sizeof(*vi));
	if (!vi)
		return -ENOMEM;
	for (size_t i = 0; i <= n; i++)
		vi[i].size = sizeof(vi[i]);
	err = ckpt_versions_list(ctx, vi, n, &n);
	for (size_t i = 0; err == 0 && i < n; i++)
		if (vi[i].version == version) {
			*world = vi[i].world_size;
			free(vi);
			return 0;
		}
	free(vi);
	/* Not in this root's index: restored from a copy elsewhere (node or
	 * partner DRAM, SHARED) after the job moved to other nodes. libckpt
	 * takes such a copy only when it is this rank's shard of a job of the
	 * same size (the header's world size is checked), so nothing was
	 * resharded. */
	return err;
}

int tr_dump_state(const char *dir, const char *name, const float *p, size_t off, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.%zu.%zu.f32", dir, name, off, n);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, sizeof(float), n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "trainer: cannot write %s\n", path);
		return -EIO;
	}
	return 0;
}

void tr_reshard_data(tr_rng *rng, tr_data *d, const tr_corpus *c, uint64_t seed, uint32_t rank, uint64_t step)
{
	uint64_t seen = d->seen;
	tr_rng_seed(rng, seed * 0x100000001b3ull + (uint64_t)rank + 1 + step * 0x9e3779b97f4a7c15ull);
	tr_data_init(d, c);
	d->seen = seen;
}
