/* One DRAM pool per job: the descriptor a rank of job A is handed maps A's
 * pool only, in which job B's shard bytes cannot be found; pools count
 * against the node budget (--pool-size), a job that does not fit writes to
 * disk (NO_SPACE), and the pool of a job with no rank left on the node is
 * released for a newcomer (its DRAM copies go, the others stay). */
#include "helpers.h"
#include "roles_test.h"

#include <sys/mman.h>

#define SHARD (1u << 20)
#define JOB_POOL (24u << 20)

/* A WRITE grant's descriptor, kept: fstat and map all of it. */
static int grant_fd(ckptd_client *c, const char *job, uint64_t v, uint32_t rank)
{
	ckptd_msg m = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(m.u.segment_request.job, sizeof(m.u.segment_request.job), "%s", job);
	m.u.segment_request.version = v;
	m.u.segment_request.rank = rank;
	m.u.segment_request.mode = CKPTD_SEG_WRITE;
	m.u.segment_request.bytes = SHARD;
	T_ASSERT(ckptd_client_call(c, &m, &rep) == 0);
	if (rep.type != CKPTD_MSG_SEGMENT_GRANT)
		T_FAIL("no grant for %s v%llu: %u %s", job, (unsigned long long)v, rep.u.error.code, rep.u.error.text);
	ckptd_msg_free(&rep);
	int fd = ckptd_client_take_fd(c);
	T_ASSERT(fd >= 0);
	return fd;
}

/* 1 if the first 64 bytes of (v, rank)'s pattern occur in the mapping of fd. */
static int holds_pattern(int fd, uint64_t v, uint32_t rank)
{
	struct stat st;
	T_ASSERT(fstat(fd, &st) == 0);
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	T_ASSERT(p != MAP_FAILED);
	uint8_t pat[SHARD];
	rt_pattern(pat, sizeof(pat), v, rank);
	int found = memmem(p, (size_t)st.st_size, pat, 64) != NULL;
	munmap(p, (size_t)st.st_size);
	return found;
}

int main(void)
{
	rt_env env;
	rt_init(&env, "roles-pools");
	daemon_t d;
	static const char *const args[] = { "--role", "both", "--pool-size", "48M", "--job-pool-size", "24M",
	                                    "--retention-interval", "0", NULL };
	rt_daemon(&env, &d, "n1", 0, args);
	rt_start(&env, &d);
	ckptd_secret *sa = rt_job_secret(&env, "jobA"), *sb = rt_job_secret(&env, "jobB"),
	             *sc = rt_job_secret(&env, "jobC");

	ckptd_client *a = rt_rank(d.unixa, "jobA", sa, 0, 1);
	ckptd_client *b = rt_rank(d.unixa, "jobB", sb, 0, 1);
	/* The first save of each job waits for its pool to be prepared. */
	T_ASSERT(rt_save(a, "jobA", 1, 0, 1, SHARD) == 0);
	T_ASSERT(rt_save(b, "jobB", 1, 0, 1, SHARD) == 0);
	T_ASSERT(rt_verify(a, "jobA", 1, 0, SHARD) == 0);
	T_ASSERT(rt_verify(b, "jobB", 1, 0, SHARD) == 0);

	/* What a rank of A can map: A's pool, exactly, without B's bytes. The
	 * pattern depends on (version, rank) only, so B writes a version A never
	 * does, and both descriptors are searched for it. */
	T_ASSERT(rt_save(b, "jobB", 7, 0, 1, SHARD) == 0);
	int fa = grant_fd(a, "jobA", 2, 0), fb = grant_fd(b, "jobB", 2, 0);
	struct stat sta, stb;
	T_ASSERT(fstat(fa, &sta) == 0 && fstat(fb, &stb) == 0);
	if ((uint64_t)sta.st_size != JOB_POOL || (uint64_t)stb.st_size != JOB_POOL)
		T_FAIL("pool sizes %lld and %lld, want %u each", (long long)sta.st_size, (long long)stb.st_size, JOB_POOL);
	T_ASSERT(sta.st_ino != stb.st_ino);
	T_ASSERT(holds_pattern(fa, 1, 0)); /* the search works: A's own shard is there */
	T_ASSERT(holds_pattern(fb, 7, 0)); /* and B's is in B's pool */
	if (holds_pattern(fa, 7, 0))
		T_FAIL("job A's descriptor maps job B's shard");
	close(fa);
	close(fb);
	fprintf(stderr, "isolation: A's descriptor maps its own %u-byte pool; B's shard is not in it\n", JOB_POOL);

	/* A third job does not fit while A and B have ranks here: disk only. */
	ckptd_client *c = rt_rank(d.unixa, "jobC", sc, 0, 1);
	ckptd_mapping map;
	uint32_t code = 0;
	int t = rt_segment(c, "jobC", 1, 0, CKPTD_SEG_WRITE, SHARD, &map, &code);
	if (t != CKPTD_MSG_ERROR || code != CKPTD_ERR_NO_SPACE)
		T_FAIL("job C got %d/%u, want NO_SPACE", t, code);
	ckptd_client_close(c);

	/* A leaves the node: its pool goes to the next job that needs one. */
	ckptd_client_close(a);
	/* Until the agent has seen A's session close, C is still refused. */
	uint64_t until = rt_ms() + 15000;
	uint32_t saved;
	for (;;) {
		c = rt_rank(d.unixa, "jobC", sc, 0, 1);
		saved = rt_save(c, "jobC", 1, 0, 1, SHARD);
		if (saved != CKPTD_ERR_NO_SPACE || rt_ms() >= until)
			break;
		ckptd_client_close(c);
		usleep(50000);
	}
	if (saved != 0)
		T_FAIL("job C got %u after A left, want its pool", saved);
	T_ASSERT(rt_verify(c, "jobC", 1, 0, SHARD) == 0);
	T_ASSERT(rt_verify(b, "jobB", 1, 0, SHARD) == 0); /* B, still here, kept its pool */
	a = rt_rank(d.unixa, "jobA", sa, 0, 1);
	int r = rt_verify(a, "jobA", 1, 0, SHARD);
	if (r != -(int)CKPTD_ERR_NOT_FOUND && r != -(int)CKPTD_ERR_NO_SPACE)
		T_FAIL("job A's DRAM copy should be gone with its pool: %d", r);
	/* The coordinator heard: A's version 1 is no longer held in DRAM. */
	ckptd_client *cli = rt_connect(d.unixa, "jobA", CKPTD_ROLE_CLI, sa);
	uint64_t end = rt_ms() + 5000;
	ckptd_version_info vi = { 0 };
	int listed = 1;
	while (rt_ms() < end && (listed = rt_list_find(cli, "jobA", 1, &vi)) && (vi.tiers & CKPT_TIER_LOCAL_MEM))
		usleep(50000);
	if (listed && (vi.tiers & CKPT_TIER_LOCAL_MEM))
		T_FAIL("the coordinator still counts job A's released DRAM copy");
	ckptd_client_close(cli);
	ckptd_client_close(a);
	ckptd_client_close(b);
	ckptd_client_close(c);
	ckptd_secret_free(sa);
	ckptd_secret_free(sb);
	ckptd_secret_free(sc);
	T_ASSERT(rt_stop(&d) == 0);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
