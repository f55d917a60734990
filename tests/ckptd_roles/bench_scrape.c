/* Scrape latency of the coordinator's /metrics with 16,384 ranks reporting
 * their step times. Starts `ckptd --role coordinator --metrics-listen` on
 * 127.0.0.1, connects AGENTS simulated agents (TCP, AGENT_HELLO), has them
 * commit a few versions of all ranks (SHARD_DONE, so the commit series
 * exist), then keeps sending one STEP_REPORT per rank per second from a
 * thread (some ranks slower, so stragglers have series) while the main
 * thread times SCRAPES GET /metrics over a plain HTTP/1.0 socket. Reports
 * the median and p99 of the scrapes, the body size, and the coordinator's
 * CPU time (/proc/PID/stat) per second of reporting. A program, not a test:
 *   CKPT_BIN=build/bin build/tests/ckptd-scrape-bench [AGENTS] [RANKS_PER_AGENT] [SCRAPES] */
#include "roles_test.h"

#include <pthread.h>

#define MAX_AGENTS 1024
#define JOB "scrape"
#define VERSIONS 3

typedef struct reporter {
	ckptd_client **ag;
	int agents;
	uint32_t per_agent;
	volatile int stop;
	uint64_t rounds, reports, late_rounds;
	uint64_t first_ns, last_ns;
	int failed;
} reporter;

static uint64_t ns_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One round: every rank's report, each agent's in a burst, then the OKs
 * (all agents' bursts first, so that their round trips overlap). */
static int report_round(reporter *r, uint64_t step)
{
	for (int i = 0; i < r->agents; i++) {
		for (uint32_t k = 0; k < r->per_agent; k++) {
			uint32_t rank = (uint32_t)i * r->per_agent + k;
			ckptd_msg m = { .type = CKPTD_MSG_STEP_REPORT };
			snprintf(m.u.step_report.job, sizeof(m.u.step_report.job), "%s", JOB);
			m.u.step_report.rank = rank;
			m.u.step_report.step = step;
			/* 100 ms steps with a little spread; one rank in 2,048 at 1.6x */
			m.u.step_report.step_ns = (rank % 2048 == 5 ? 160000000ull : 100000000ull) + (rank % 97) * 10000ull;
			m.u.step_report.count = 10;
			snprintf(m.u.step_report.node, sizeof(m.u.step_report.node), "sim%d", i);
			if (ckptd_client_send(r->ag[i], &m) != 0)
				return -1;
		}
	}
	for (int i = 0; i < r->agents; i++) {
		for (uint32_t got = 0; got < r->per_agent;) {
			ckptd_msg m;
			if (ckptd_client_recv(r->ag[i], &m) != 0)
				return -1;
			if (m.type == CKPTD_MSG_ERROR) {
				fprintf(stderr, "STEP_REPORT refused: %s\n", m.u.error.text);
				ckptd_msg_free(&m);
				return -1;
			}
			got += m.type == CKPTD_MSG_OK;
			ckptd_msg_free(&m);
		}
		r->reports += r->per_agent;
	}
	return 0;
}

static void *reporter_main(void *arg)
{
	reporter *r = arg;
	uint64_t next = ns_now();
	r->first_ns = next;
	for (uint64_t step = 10; !r->stop; step += 10) {
		if (report_round(r, step) < 0) {
			r->failed = 1;
			break;
		}
		r->rounds++;
		next += 1000000000ull;
		uint64_t now = ns_now();
		if (now >= next) {
			r->late_rounds++;
			next = now;
		} else {
			while (!r->stop && ns_now() < next)
				usleep(10000);
		}
	}
	r->last_ns = ns_now();
	return NULL;
}

/* GET /metrics over HTTP/1.0; returns the body's size, -1 on error. */
static long scrape(int port, int *status)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		close(fd);
		return -1;
	}
	static char buf[1 << 16];
	static char head[4096];
	size_t total = 0, headlen = 0;
	long hdr_end = -1;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (hdr_end < 0) {
			size_t take = (size_t)n < sizeof(head) - 1 - headlen ? (size_t)n : sizeof(head) - 1 - headlen;
			memcpy(head + headlen, buf, take);
			headlen += take;
			head[headlen] = 0;
			char *e = strstr(head, "\r\n\r\n");
			if (e)
				hdr_end = (long)(e - head) + 4;
		}
		total += (size_t)n;
	}
	close(fd);
	*status = 0;
	sscanf(head, "HTTP/1.%*d %d", status);
	return hdr_end < 0 ? -1 : (long)total - hdr_end;
}

/* utime + stime of pid, in seconds. */
static double proc_cpu_s(pid_t pid)
{
	char p[64], line[2048];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return -1;
	char *ok = fgets(line, sizeof(line), f);
	fclose(f);
	char *s = ok ? strrchr(line, ')') : NULL;
	unsigned long ut = 0, st = 0;
	if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv)
{
	rt_env env;
	daemon_t d;
	int agents = argc > 1 ? atoi(argv[1]) : 64;
	int per_agent = argc > 2 ? atoi(argv[2]) : 256;
	int scrapes = argc > 3 ? atoi(argv[3]) : 50;
	if (agents < 1 || agents > MAX_AGENTS || per_agent < 1 || scrapes < 2)
		return T_EXIT_FAIL;
	uint32_t world = (uint32_t)agents * (uint32_t)per_agent;
	rt_init(&env, "scrape-bench");
	char mlisten[64];
	int mport = td_free_port("127.0.0.1");
	snprintf(mlisten, sizeof(mlisten), "127.0.0.1:%d", mport);
	const char *args[] = { "--role", "coordinator", "--log-level", "warn", "--metrics-listen", mlisten, NULL };
	rt_daemon(&env, &d, "coord", 1, args);
	rt_start(&env, &d);

	static ckptd_client *ag[MAX_AGENTS];
	for (int i = 0; i < agents; i++) {
		char node[32], address[32];
		snprintf(node, sizeof(node), "sim%d", i);
		snprintf(address, sizeof(address), "127.0.0.1:%d", 20000 + i);
		ag[i] = rt_sim_agent(&env, d.tcp, node, address, 1ull << 30);
	}
	/* A few committed versions at two tiers: the commit counters and the
	 * commit latency histograms get their series. */
	static const uint32_t tiers[] = { CKPT_TIER_LOCAL_MEM, CKPT_TIER_LOCAL_DISK };
	for (uint64_t v = 1; v <= VERSIONS; v++) {
		for (size_t t = 0; t < 2; t++) {
			for (int i = 0; i < agents; i++) {
				for (int k = 0; k < per_agent; k++) {
					uint32_t rank = (uint32_t)i * (uint32_t)per_agent + (uint32_t)k;
					ckptd_msg m = { .type = CKPTD_MSG_SHARD_DONE };
					snprintf(m.u.shard_done.job, sizeof(m.u.shard_done.job), "%s", JOB);
					m.u.shard_done.version = v;
					m.u.shard_done.rank = rank;
					m.u.shard_done.world_size = world;
					m.u.shard_done.tier = tiers[t];
					m.u.shard_done.bytes = 1 << 20;
					m.u.shard_done.checksum = v * 31 + rank;
					m.u.shard_done.lineage = 1;
					m.u.shard_done.stall_ns = 50000000;
					m.u.shard_done.durable_ns = 400000000;
					T_ASSERT(ckptd_client_send(ag[i], &m) == 0);
				}
			}
			for (int i = 0; i < agents; i++) {
				for (;;) {
					ckptd_msg m;
					T_ASSERT(ckptd_client_recv(ag[i], &m) == 0);
					if (m.type == CKPTD_MSG_ERROR)
						T_FAIL("SHARD_DONE refused: %s", m.u.error.text);
					int done = m.type == CKPTD_MSG_COMMIT_NOTICE && m.u.commit_notice.version == v &&
					           m.u.commit_notice.tier == tiers[t];
					ckptd_msg_free(&m);
					if (done)
						break;
				}
			}
		}
	}

	reporter rep = { .ag = ag, .agents = agents, .per_agent = (uint32_t)per_agent };
	pthread_t th;
	T_ASSERT(pthread_create(&th, NULL, reporter_main, &rep) == 0);
	/* Three rounds first: every rank known, the judge has run. */
	while (rep.rounds < 3 && !rep.failed)
		usleep(20000);
	if (rep.failed)
		T_FAIL("step reports failed");
	double cpu0 = proc_cpu_s(d.pid);
	uint64_t t0 = ns_now(), reports0 = rep.reports;
	uint64_t *lat = calloc((size_t)scrapes, sizeof(*lat));
	T_ASSERT(lat);
	long body = 0;
	for (int i = 0; i < scrapes; i++) {
		int status = 0;
		uint64_t s0 = ns_now();
		body = scrape(mport, &status);
		lat[i] = ns_now() - s0;
		if (body < 0 || status != 200)
			T_FAIL("GET /metrics: status %d, body %ld", status, body);
		usleep(200000);
	}
	/* The reporting's cost alone, without scrapes, over as long again. */
	uint64_t t1 = ns_now(), reports1 = rep.reports;
	double cpu1 = proc_cpu_s(d.pid);
	usleep((useconds_t)((t1 - t0) / 1000));
	uint64_t t2 = ns_now(), reports2 = rep.reports;
	double cpu2 = proc_cpu_s(d.pid);
	rep.stop = 1;
	pthread_join(th, NULL);
	if (rep.failed)
		T_FAIL("step reports failed");

	qsort(lat, (size_t)scrapes, sizeof(*lat), cmp_u64);
	size_t p99 = ((size_t)scrapes * 99 + 99) / 100 - 1;
	double wall_a = (double)(t1 - t0) / 1e9, wall_b = (double)(t2 - t1) / 1e9;
	printf("ckptd --role coordinator --metrics-listen, %d simulated agents x %d ranks = %u ranks, "
	       "1 STEP_REPORT per rank per second, %d versions committed at 2 tiers; online CPUs %ld\n",
	       agents, per_agent, world, VERSIONS, sysconf(_SC_NPROCESSORS_ONLN));
	printf("  GET /metrics (HTTP/1.0, new connection each): median %.2f ms, p99 %.2f ms, min %.2f ms, "
	       "max %.2f ms (%d scrapes, 200 ms apart)\n",
	       lat[scrapes / 2] / 1e6, lat[p99] / 1e6, lat[0] / 1e6, lat[scrapes - 1] / 1e6, scrapes);
	printf("  body: %ld bytes\n", body);
	printf("  step reports delivered: %.0f/s while scraping, %.0f/s without (%llu rounds late of %llu)\n",
	       (double)(reports1 - reports0) / wall_a, (double)(reports2 - reports1) / wall_b,
	       (unsigned long long)rep.late_rounds, (unsigned long long)rep.rounds);
	printf("  coordinator CPU: %.1f %% of a core while reporting and scraping, %.1f %% reporting alone "
	       "(%.2f us per report)\n",
	       100.0 * (cpu1 - cpu0) / wall_a, 100.0 * (cpu2 - cpu1) / wall_b,
	       (reports2 > reports1 ? (cpu2 - cpu1) * 1e6 / (double)(reports2 - reports1) : 0.0));
	printf("RESULT ranks=%u scrape_median_ms=%.3f scrape_p99_ms=%.3f body_bytes=%ld coord_cpu_pct_scraping=%.2f "
	       "coord_cpu_pct_reporting=%.2f reports_per_s=%.0f\n",
	       world, lat[scrapes / 2] / 1e6, lat[p99] / 1e6, body, 100.0 * (cpu1 - cpu0) / wall_a,
	       100.0 * (cpu2 - cpu1) / wall_b, (double)(reports2 - reports1) / wall_b);
	free(lat);
	for (int i = 0; i < agents; i++)
		ckptd_client_close(ag[i]);
	rt_stop(&d);
	ckptd_secret_free(env.cluster);
	t_rmrf(env.dir);
	return 0;
}
