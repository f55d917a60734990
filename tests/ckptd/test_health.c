/* The agent's node evidence for a straggler (ckptd/health) over a fake
 * /proc, cgroup tree and kernel log written here, sampled twice with the
 * files changed in between as a troubled node's would:
 * - CPU steal and iowait per mille of the node's CPU time between the two
 *   samples, the rank's cgroup throttling (nr_throttled, throttled_usec),
 *   PSI avg10 as read, the worst disk's time per I/O (a loop device left
 *   out), OOM kills and hardware errors from the kernel log (an old one
 *   outside the hour does not count, a normal message is not an event),
 *   the rank's step times oldest first, a verdict naming each cause;
 * - a quiet node: no cause, "nothing on the node stands out";
 * - what cannot be read is left out (its flag clear), never guessed: no
 *   PSI, no kernel log, a rank whose /proc/PID/cgroup climbs out of the
 *   tree ("..") gets no cgroup figures;
 * - a kernel log of 100,000 records is read 256 records a sample at most. */
#include "helpers.h"

#include <stdarg.h>
#include <sys/stat.h>

#include "health/health.h"

#define PID 4242

static char root[600];

static void put(const char *rel, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(const char *rel, const char *fmt, ...)
{
	char path[900], cmd[1000];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	T_ASSERT(system(cmd) == 0);
	FILE *f = fopen(path, "w");
	T_ASSERT(f);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static void append(const char *rel, const char *line)
{
	char path[900];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "a");
	T_ASSERT(f);
	fputs(line, f);
	fclose(f);
}

/* The agent's clock as the samples are given it: ten hours after boot, so
 * that kernel records of two hours ago have a time. */
static uint64_t mono_ns(void)
{
	return 36000ull * 1000000000ull;
}

static ckptd_health *open_health(int with_kmsg)
{
	char proc[700], cg[700], km[700];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(cg, sizeof(cg), "%s/cgroup", root);
	snprintf(km, sizeof(km), "%s/kmsg", root);
	ckptd_health_opts o = { .proc = proc, .cgroup = cg, .kmsg = with_kmsg ? km : "" };
	ckptd_health *h;
	T_OK(ckptd_health_new(&o, &h));
	return h;
}

/* /proc/stat with user, system, idle, iowait, steal as given (ticks). */
static void stat_file(unsigned long long user, unsigned long long idle, unsigned long long iowait,
                      unsigned long long steal)
{
	put("proc/stat", "cpu  %llu 0 100 %llu %llu 0 0 %llu 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nctxt 99\n", user, idle, iowait,
	    steal);
}

static void troubled_node(void)
{
	uint64_t now = mono_ns();
	stat_file(1000, 8000, 100, 0);
	put("proc/diskstats", "   7 0 loop0 1 0 0 90000 1 0 0 90000 0 0 0\n 253 0 vda 1000 0 0 2000 1000 0 0 2000 0 0 0\n");
	put("proc/pressure/cpu", "some avg10=25.00 avg60=10.00 avg300=1.00 total=1000\n");
	put("proc/pressure/memory", "some avg10=8.00 avg60=1.00 avg300=0.10 total=10\nfull avg10=6.50 avg60=0.50 avg300=0.00 total=5\n");
	put("proc/pressure/io", "some avg10=0.50 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=1\n");
	put("proc/4242/cgroup", "0::/job.slice/rank3\n");
	put("cgroup/job.slice/rank3/cpu.stat", "usage_usec 100\nnr_periods 100\nnr_throttled 5\nthrottled_usec 1000\n");
	/* One OOM kill two hours ago (outside the hour), a normal line. */
	char line[300];
	snprintf(line, sizeof(line), "6,1,%llu,-;Out of memory: Killed process 1 (old)\n",
	         (unsigned long long)((now - 7200ull * 1000000000ull) / 1000));
	put("kmsg", "%s6,2,%llu,-;eth0: link up\n SUBSYSTEM=net\n", line, (unsigned long long)(now / 1000 - 5000000));
	ckptd_health *h = open_health(1);
	ckptd_health_rank(h, "J", 3, PID);
	ckptd_health_sample(h, now);
	/* Ten seconds later: 1,000 ticks, of which 312 stolen and 50 waiting on
	 * I/O; 50 of 100 periods throttled (2.5 s); vda 100 I/Os in 9 s; an
	 * OOM kill and a machine check. */
	stat_file(1000 + 538, 8000 + 100, 100 + 50, 312);
	put("proc/diskstats", "   7 0 loop0 2 0 0 990000 2 0 0 990000 0 0 0\n 253 0 vda 1050 0 0 6500 1050 0 0 6500 0 0 0\n");
	put("cgroup/job.slice/rank3/cpu.stat", "usage_usec 200\nnr_periods 200\nnr_throttled 55\nthrottled_usec 2501000\n");
	snprintf(line, sizeof(line), "3,3,%llu,-;Out of memory: Killed process 77 (python3) total-vm:1kB\n",
	         (unsigned long long)(now / 1000 + 1000000));
	append("kmsg", line);
	snprintf(line, sizeof(line), "2,4,%llu,-;mce: [Hardware Error]: Machine check events logged\n",
	         (unsigned long long)(now / 1000 + 2000000));
	append("kmsg", line);
	for (int i = 1; i <= 40; i++)
		ckptd_health_step(h, "J", 3, (uint64_t)i * 1000000ull);
	ckptd_health_step(h, "J", 4, 999); /* not watched: ignored */
	ckptd_health_sample(h, now + 10000000000ull);

	ckptd_evidence_request rq = { .job = "J", .rank = 3, .windows = 12, .step_ns = 180000000ull,
	                              .fastest_ns = 100000000ull, .window_ns = 10000000000ull };
	ckptd_node_evidence e;
	ckptd_health_evidence(h, &rq, "gpu-7", now + 10000000000ull, &e);
	printf("%s\n", e.text);
	T_ASSERT(e.flags == (CKPTD_EV_CPU | CKPTD_EV_CGROUP | CKPTD_EV_PSI | CKPTD_EV_DISK | CKPTD_EV_KMSG |
	                     CKPTD_EV_STEPS));
	T_ASSERT(e.window_ns == 10000000000ull && e.windows == 12 && e.rank == 3 && !strcmp(e.node, "gpu-7"));
	T_ASSERT(e.steal_pm == 312 && e.iowait_pm == 50);
	T_ASSERT(e.nr_periods == 100 && e.nr_throttled == 50 && e.throttled_us == 2500000);
	T_ASSERT(e.psi_cpu_some == 2500 && e.psi_mem_some == 800 && e.psi_mem_full == 650 && e.psi_io_some == 50 &&
	         e.psi_io_full == 25);
	T_ASSERT(!strcmp(e.disk, "vda") && e.disk_await_us == 90000); /* 9000 ms over 100 I/Os; loop0 left out */
	T_ASSERT(e.oom_kills == 1 && e.hw_errors == 1 && strstr(e.kmsg, "Machine check"));
	T_ASSERT(!strcmp(e.verdict, "OOM kill, hardware errors, CPU steal, CPU throttling, CPU contention, "
	                            "memory pressure, slow disk"));
	/* The last 32 step times, oldest first: 9 ms .. 40 ms. */
	T_ASSERT(strstr(e.text, "oldest first): 9.0 10.0 ") && strstr(e.text, " 40.0;"));
	T_ASSERT(strstr(e.text, "1.80x the fastest"));
	for (const char *p = e.text; *p; p++)
		T_ASSERT(*p >= 0x20 && *p <= 0x7e);
	ckptd_health_free(h);
}

static void quiet_node(void)
{
	uint64_t now = mono_ns();
	stat_file(1000, 8000, 0, 0);
	put("proc/diskstats", " 253 0 vda 1000 0 0 2000 1000 0 0 2000 0 0 0\n");
	put("kmsg", "6,1,5,-;Linux version 6.1\n");
	put("proc/pressure/cpu", "some avg10=0.10 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
	put("proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
	put("proc/pressure/io", "some avg10=1.00 avg60=0.00 avg300=0.00 total=9\nfull avg10=0.50 avg60=0.00 avg300=0.00 total=4\n");
	ckptd_health *h = open_health(1);
	ckptd_health_rank(h, "J", 0, PID);
	ckptd_health_sample(h, now);
	stat_file(1500, 8500, 0, 0);
	ckptd_health_sample(h, now + 5000000000ull);
	ckptd_evidence_request rq = { .job = "J", .rank = 0, .window_ns = 60000000000ull };
	ckptd_node_evidence e;
	ckptd_health_evidence(h, &rq, "n0", now + 5000000000ull, &e);
	printf("%s\n", e.text);
	T_ASSERT(e.window_ns == 5000000000ull); /* only five seconds were sampled */
	T_ASSERT(e.steal_pm == 0 && e.oom_kills == 0 && e.hw_errors == 0 && !e.verdict[0]);
	T_ASSERT(strstr(e.text, "nothing on the node stands out"));
	ckptd_health_free(h);
}

static void missing_files(void)
{
	uint64_t now = mono_ns();
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/proc/pressure' '%s/cgroup'", root, root);
	T_ASSERT(system(cmd) == 0);
	put("proc/4242/cgroup", "0::/job.slice/../../etc\n");
	put("cgroup/etc/cpu.stat", "usage_usec 1\nnr_periods 1\nnr_throttled 1\nthrottled_usec 1\n");
	stat_file(10, 10, 0, 0);
	ckptd_health *h = open_health(0);
	ckptd_health_rank(h, "J", 1, PID);
	ckptd_health_sample(h, now);
	stat_file(60, 60, 0, 0);
	ckptd_health_sample(h, now + 1000000000ull);
	ckptd_evidence_request rq = { .job = "J", .rank = 1 };
	ckptd_node_evidence e;
	ckptd_health_evidence(h, &rq, "n0", now + 1000000000ull, &e);
	printf("%s\n", e.text);
	T_ASSERT(!(e.flags & (CKPTD_EV_PSI | CKPTD_EV_KMSG | CKPTD_EV_CGROUP | CKPTD_EV_STEPS)));
	T_ASSERT(e.flags & CKPTD_EV_CPU);
	T_ASSERT(strstr(e.text, "kernel log not readable"));
	/* A rank the agent does not watch: the node's figures only. */
	rq.rank = 9;
	ckptd_health_evidence(h, &rq, "n0", now + 1000000000ull, &e);
	T_ASSERT(!(e.flags & CKPTD_EV_STEPS) && (e.flags & CKPTD_EV_CPU));
	ckptd_health_free(h);
}

static void big_kmsg(void)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/kmsg", root);
	FILE *f = fopen(path, "w");
	T_ASSERT(f);
	for (int i = 0; i < 100000; i++)
		fprintf(f, "6,%d,%llu,-;mce: [Hardware Error]: CPU %d: Machine check %d\n", i,
		        (unsigned long long)(mono_ns() / 1000 - 1000000 + (uint64_t)i), i % 64, i);
	fclose(f);
	ckptd_health *h = open_health(1);
	uint64_t now = mono_ns();
	double t0 = t_cpu_s();
	ckptd_health_sample(h, now);
	double dt = t_cpu_s() - t0;
	ckptd_evidence_request rq = { .job = "J", .rank = 0 };
	ckptd_node_evidence e;
	ckptd_health_evidence(h, &rq, "n0", now, &e);
	/* 256 reads of 8 KiB: about 33,000 of the 100,000 records, and the
	 * event list holds the newest 256. */
	printf("one sample over a 100,000-record kernel log: %.1f ms of CPU, %u hardware errors counted\n", dt * 1e3,
	       e.hw_errors);
	T_ASSERT(e.hw_errors == 256);
	ckptd_health_free(h);
}

int main(void)
{
	char *d = t_tmpdir("health");
	snprintf(root, sizeof(root), "%s", d);
	troubled_node();
	quiet_node();
	missing_files();
	big_kmsg();
	t_rmrf(d);
	printf("PASS\n");
	return T_EXIT_PASS;
}
