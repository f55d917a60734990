/* Parsers of the kernel files a straggler's node evidence comes from
 * (health.h): /proc/stat, a cgroup's cpu.stat, /proc/pressure/{cpu,memory,io},
 * /proc/diskstats, /proc/PID/cgroup and /dev/kmsg records. No I/O, no
 * state, no log: what tests/fuzz/fuzz_health.c instruments. Every parser
 * reads only buf[0..len) (not NUL-terminated), in one pass, and refuses a
 * line it cannot read with -EINVAL; numbers that overflow 64 bits are
 * refused too. */
#ifndef CKPTD_HEALTH_PARSE_H
#define CKPTD_HEALTH_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* The aggregate "cpu" line of /proc/stat, in clock ticks. */
typedef struct hp_cpu {
	uint64_t total; /* user + nice + system + idle + iowait + irq + softirq + steal */
	uint64_t idle, iowait, steal;
} hp_cpu;
int hp_parse_stat(const char *buf, size_t len, hp_cpu *out);

/* A cgroup v2 cpu.stat; fields it lacks stay 0 (have says which came). */
typedef struct hp_cgroup_cpu {
	uint64_t usage_usec, nr_periods, nr_throttled, throttled_usec;
	unsigned have; /* bit 0 usage, 1 periods, 2 throttled, 3 throttled_usec */
} hp_cgroup_cpu;
int hp_parse_cpu_stat(const char *buf, size_t len, hp_cgroup_cpu *out);

/* /proc/pressure/{cpu,memory,io}: avg10 in hundredths of a percent. */
typedef struct hp_psi {
	uint32_t some_avg10, full_avg10;
	uint64_t some_total, full_total; /* microseconds stalled */
	int have_full;
} hp_psi;
int hp_parse_psi(const char *buf, size_t len, hp_psi *out);

/* One block device of /proc/diskstats: I/Os completed (reads + writes) and
 * the milliseconds spent on them. */
#define HP_DISK_NAME 32
typedef struct hp_disk {
	char name[HP_DISK_NAME];
	uint64_t ios, ms;
} hp_disk;
/* Up to cap devices into out, *n of them (devices beyond cap are
 * skipped; loop and ram devices are left out). */
int hp_parse_diskstats(const char *buf, size_t len, hp_disk *out, size_t cap, size_t *n);

/* The cgroup v2 path of a process ("0::/some/path"), checked: absolute,
 * no "." or ".." component, printable. */
int hp_parse_cgroup(const char *buf, size_t len, char *path, size_t cap);

/* One /dev/kmsg record ("prio,seq,usec,flags;message", then optional
 * continuation lines starting with a space). kind: what it says. */
enum { HP_KMSG_OTHER = 0, HP_KMSG_OOM = 1, HP_KMSG_HW = 2 };
typedef struct hp_kmsg {
	uint64_t seq, usec;
	int kind;
	char text[160]; /* the message, printable ASCII, cut */
} hp_kmsg;
int hp_parse_kmsg(const char *buf, size_t len, hp_kmsg *out);

#endif
