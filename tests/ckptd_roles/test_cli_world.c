/* `ckpt verify --daemon` and `ckpt restore --daemon` do not trust the world
 * size the coordinator answers with: their work follows the copies its
 * answer lists. The world size comes from ranks holding the job's secret, so
 * a buggy rank (or coordinator) can claim 2^32-1 ranks.
 *
 * One ckptd in both roles; 16 simulated ranks of job "big" register with
 * world size 4294967295 and save version 1 into node DRAM (bytes that are
 * no shard image). Then, each bounded by `timeout 20` (they take
 * milliseconds; before, verify walked world x copies and restore asked the
 * agent about every one of 2^32-1 ranks, hours):
 *  - verify --json: exit 3, world_size 4294967295, 0 intact ranks (the
 *    images are not shards), every copy reported;
 *  - restore of every rank: exit 4, naming the 16 listed ranks of
 *    4294967295, nothing left in --out;
 *  - restore --rank 3: exit 3 (its copy is no shard image), at once. */
#include "roles_test.h"

#define RANKS 16
#define WORLD 4294967295u

static rt_env env;
static daemon_t d;

/* Runs the tool with a time bound; its exit status, output in out. */
static int tool(const char *args, const char *out)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "timeout 20 '%s/ckpt' %s --daemon '%s' --token-file '%s' --job big --version 1 "
	         ">'%s' 2>&1", getenv("CKPT_BIN"), args, d.unixa, env.tokpath, out);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int dir_entries(const char *path)
{
	DIR *dir = opendir(path);
	int k = 0;
	for (struct dirent *e; dir && (e = readdir(dir));)
		k += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (dir)
		closedir(dir);
	return k;
}

int main(void)
{
	int failures = 0;
	rt_init(&env, "cli-world");
	static const char *const args[] = { "--role", "both", "--pool-size", "16M", "--job-pool-size", "8M", NULL };
	rt_daemon(&env, &d, "n1", 0, args);
	rt_start(&env, &d);
	ckptd_secret *js = rt_job_secret(&env, "big");
	ckptd_client *ranks[RANKS];
	for (uint32_t r = 0; r < RANKS; r++) {
		ranks[r] = rt_rank(d.unixa, "big", js, r, WORLD);
		uint32_t code = rt_save(ranks[r], "big", 1, r, WORLD, 8192);
		if (code)
			T_FAIL("rank %u: DRAM save refused (%u)", r, code);
	}

	char out[700], outdir[700];
	snprintf(out, sizeof(out), "%s/tool.out", env.dir);
	snprintf(outdir, sizeof(outdir), "%s/restored", env.dir);
	int rc = tool("verify --json", out);
	if (rc != 3 || !td_file_has(out, 0, "\"world_size\": 4294967295") || !td_file_has(out, 0, "\"intact_ranks\": 0") ||
	    !td_file_has(out, 0, "\"rank\": 15,")) {
		fprintf(stderr, "FAIL: verify exited %d (want 3, world_size 4294967295, 0 intact ranks, rank 15 listed)\n",
		        rc);
		td_print_tail(out, 10);
		failures++;
	}
	char a[900];
	snprintf(a, sizeof(a), "restore --out '%s'", outdir);
	rc = tool(a, out);
	if (rc != 4 || !td_file_has(out, 0, "lists copies of 16 of version 1's 4294967295 ranks") ||
	    dir_entries(outdir) > 0) {
		fprintf(stderr, "FAIL: restore of every rank exited %d (want 4, naming 16 of 4294967295 ranks), %d "
		        "entries left in --out\n", rc, dir_entries(outdir));
		td_print_tail(out, 10);
		failures++;
	}
	snprintf(a, sizeof(a), "restore --rank 3 --out '%s'", outdir);
	rc = tool(a, out);
	if (rc != 3) {
		fprintf(stderr, "FAIL: restore --rank 3 exited %d (want 3: its copy is no shard image)\n", rc);
		td_print_tail(out, 10);
		failures++;
	}
	for (uint32_t r = 0; r < RANKS; r++)
		ckptd_client_close(ranks[r]);
	ckptd_secret_free(js);
	if (rt_stop(&d) != 0) {
		fprintf(stderr, "FAIL: the daemon did not stop cleanly\n");
		failures++;
	}
	if (failures) {
		fprintf(stderr, "%d check(s) failed; logs in %s\n", failures, env.dir);
		return T_EXIT_FAIL;
	}
	fprintf(stderr, "ok: verify and restore --daemon followed the 16 listed ranks, not a world size of 2^32-1\n");
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return T_EXIT_PASS;
}
