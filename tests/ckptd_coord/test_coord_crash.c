/* ckptd_coord: kill -9 a coordinator in the middle of commits, many times.
 * After each kill the reopened database still shows every commit the child
 * had seen returned, nothing committed before has become uncommitted, and a
 * coordinator rebuilt from the agents' views agrees with it. */
#include "coord_test.h"

#include <fcntl.h>
#include <stddef.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define RUNS 50
#define WORLD 8
#define NODES 3
#define MAGIC 0x43525348u

/* What an agent holds, appended before the coordinator hears of it. */
typedef struct held_rec {
	uint32_t magic, node;
	uint64_t version;
	uint32_t rank, world, tier, pad;
	uint64_t lineage, bytes, checksum, check;
} held_rec;

typedef struct commit_rec {
	uint32_t magic, tiers;
	uint64_t version, check;
} commit_rec;

static uint64_t fold(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static void child(const char *db, const char *held, const char *commits, int run)
{
	ckptd_coord *co;
	if (ckptd_coord_open(db, 0, &co) < 0)
		_exit(2);
	int hf = open(held, O_WRONLY | O_APPEND | O_CREAT, 0600);
	int cf = open(commits, O_WRONLY | O_APPEND | O_CREAT, 0600);
	if (hf < 0 || cf < 0)
		_exit(2);
	srand((unsigned)run * 7919u + 1);
	char nodes[NODES][16];
	for (int i = 0; i < NODES; i++)
		snprintf(nodes[i], sizeof(nodes[i]), "node%d", i);
	uint64_t lineage = (uint64_t)run + 1;
	for (uint64_t ver = (uint64_t)run * 1000 + 1;; ver++) {
		const uint32_t tiers[2] = { CKPT_TIER_LOCAL_MEM, CKPT_TIER_LOCAL_DISK };
		for (int t = 0; t < 2; t++) {
			uint32_t order[WORLD];
			for (uint32_t i = 0; i < WORLD; i++)
				order[i] = i;
			for (uint32_t i = WORLD - 1; i > 0; i--) {
				uint32_t j = (uint32_t)rand() % (i + 1), x = order[i];
				order[i] = order[j];
				order[j] = x;
			}
			for (uint32_t i = 0; i < WORLD;) {
				uint32_t k = 1 + (uint32_t)rand() % 4;
				if (i + k > WORLD)
					k = WORLD - i;
				ckptd_coord_shard s[4];
				ckptd_coord_result res[4];
				for (uint32_t b = 0; b < k; b++) {
					uint32_t r = order[i + b];
					held_rec h = { .magic = MAGIC, .node = r % NODES, .version = ver, .rank = r,
					               .world = WORLD, .tier = tiers[t], .lineage = lineage,
					               .bytes = 4096 + r,
					               .checksum = sim_checksum("crash", ver, r, lineage) };
					h.check = fold(&h, offsetof(held_rec, check));
					if (write(hf, &h, sizeof(h)) != (ssize_t)sizeof(h))
						_exit(2);
					s[b] = (ckptd_coord_shard){ "crash", ver, r, WORLD, tiers[t], nodes[r % NODES],
					                            h.bytes, h.checksum, lineage };
				}
				if (ckptd_coord_shard_done_batch(co, s, k, res) < 0)
					_exit(3);
				for (uint32_t b = 0; b < k; b++) {
					if (res[b].status < 0)
						_exit(4);
					if (!res[b].committed)
						continue;
					commit_rec c = { MAGIC, res[b].committed, ver, 0 };
					c.check = fold(&c, offsetof(commit_rec, check));
					if (write(cf, &c, sizeof(c)) != (ssize_t)sizeof(c))
						_exit(2);
				}
				i += k;
			}
		}
	}
}

/* Reads whole, intact records of size n from path. */
static void *read_recs(const char *path, size_t n, size_t *count)
{
	*count = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *buf = malloc((size_t)len + 1);
	T_ASSERT(buf);
	T_ASSERT(fread(buf, 1, (size_t)len, f) == (size_t)len);
	fclose(f);
	*count = (size_t)len / n;
	return buf;
}

static void report(ckptd_coord *co, const held_rec *h, size_t nh)
{
	ckptd_held_shard *e = calloc(512, sizeof(*e));
	T_ASSERT(e);
	for (uint32_t node = 0; node < NODES; node++) {
		char name[16];
		snprintf(name, sizeof(name), "node%u", node);
		size_t k = 0;
		for (size_t i = 0; i <= nh; i++) {
			if (i < nh) {
				if (h[i].magic != MAGIC || h[i].check != fold(&h[i], offsetof(held_rec, check)) ||
				    h[i].node != node)
					continue;
				ckptd_held_shard *x = &e[k++];
				memset(x, 0, sizeof(*x));
				snprintf(x->job, sizeof(x->job), "crash");
				x->version = h[i].version;
				x->rank = h[i].rank;
				x->world_size = h[i].world;
				x->tiers = h[i].tier;
				x->bytes = h[i].bytes;
				x->checksum = h[i].checksum;
				x->lineage = h[i].lineage;
			}
			if (k == 512 || i == nh) {
				T_ASSERT(ckptd_coord_inventory(co, name, e, k, i == nh, NULL, NULL) == 0);
				k = 0;
			}
		}
	}
	free(e);
}

int main(void)
{
	char *base = t_tmpdir("coord-crash");
	char db[600], fresh[600], held[600], commits[600];
	snprintf(db, sizeof(db), "%s/db", base);
	snprintf(fresh, sizeof(fresh), "%s/fresh", base);
	snprintf(held, sizeof(held), "%s/held", base);
	snprintf(commits, sizeof(commits), "%s/commits", base);
	srand((unsigned)time(NULL));
	snap prev = { 0 };
	size_t seen_commits = 0, killed_mid = 0;
	for (int run = 0; run < RUNS; run++) {
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0)
			child(db, held, commits, run);
		usleep(2000 + (useconds_t)(rand() % 60000));
		kill(pid, SIGKILL);
		int st;
		T_ASSERT(waitpid(pid, &st, 0) == pid);
		if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
			T_FAIL("run %d: child exited with status %d before the kill", run, st);

		ckptd_coord *co;
		T_OK(ckptd_coord_open(db, 0, &co));
		/* Every commit the child saw returned is there. */
		size_t nc;
		commit_rec *c = read_recs(commits, sizeof(commit_rec), &nc);
		for (size_t i = 0; i < nc; i++) {
			if (c[i].magic != MAGIC || c[i].check != fold(&c[i], offsetof(commit_rec, check)))
				continue;
			ckptd_coord_version v;
			T_OK(ckptd_coord_get(co, "crash", c[i].version, &v));
			if ((v.committed & c[i].tiers) != c[i].tiers || !v.restorable)
				T_FAIL("run %d: version %llu lost its commit", run,
				       (unsigned long long)c[i].version);
		}
		seen_commits = nc;
		free(c);
		/* Nothing committed before became uncommitted. */
		snap now = snap_take(co, "crash");
		for (size_t i = 0, j = 0; i < prev.n; i++) {
			if (!prev.v[i].restorable)
				continue;
			while (j < now.n && now.v[j].version < prev.v[i].version)
				j++;
			T_ASSERT(j < now.n && now.v[j].version == prev.v[i].version);
			T_ASSERT(now.v[j].restorable &&
			         (now.v[j].committed & prev.v[i].committed) == prev.v[i].committed);
		}
		for (size_t i = 0; i < now.n; i++)
			killed_mid += !now.v[i].restorable;

		/* Rebuild from the agents' views: it has everything the database
		 * has committed, and once the same inventories reach the surviving
		 * database (copies the kill kept it from hearing of), both agree. */
		size_t nh;
		held_rec *h = read_recs(held, sizeof(held_rec), &nh);
		ckptd_coord *fr;
		T_OK(ckptd_coord_open(fresh, 0, &fr));
		report(fr, h, nh);
		snap rebuilt = snap_take(fr, "crash");
		for (size_t i = 0, j = 0; i < now.n; i++) {
			if (!now.v[i].restorable)
				continue;
			while (j < rebuilt.n && rebuilt.v[j].version < now.v[i].version)
				j++;
			T_ASSERT(j < rebuilt.n && rebuilt.v[j].restorable &&
			         (rebuilt.v[j].committed & now.v[i].committed) == now.v[i].committed);
		}
		report(co, h, nh);
		snap after = snap_take(co, "crash");
		if (!snap_equal(&after, &rebuilt))
			T_FAIL("run %d: rebuild from inventories disagrees", run);
		free(h);
		snap_free(&prev);
		prev = after;
		snap_free(&now);
		snap_free(&rebuilt);
		ckptd_coord_close(fr);
		ckptd_coord_close(co);
		t_rm_db(fresh);
	}
	printf("PASS: %d kills, %zu commits checked, %zu versions %s\n", RUNS, seen_commits,
	       prev.n, killed_mid ? "(some caught mid-save)" : "");
	snap_free(&prev);
	t_rmrf(base);
	return T_EXIT_PASS;
}
