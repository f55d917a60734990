/* Named failure points a test can arm: CKPT_FAULT="point=action[,point=action]".
 * Actions: kill (SIGKILL to self), error (the operation fails with
 * -CKPT_EFAULT_INJECTED), delay:MS (sleep), and any action may be prefixed by
 * "N@" to fire only on the N-th time the point is reached (1-based).
 * Points are listed in docs/testing.md. The set hangs off a context. */
#ifndef CKPT_FAULTS_H
#define CKPT_FAULTS_H

#include <stdint.h>

#define CKPT_FAULT_MAX 8

typedef struct ckpt_fault {
	char point[48];
	int action; /* 1 kill, 2 error, 3 delay */
	uint32_t delay_ms;
	uint32_t nth;   /* fire on this hit (0 = every hit) */
	uint32_t hits;
} ckpt_fault;

typedef struct ckpt_faults {
	int n;
	ckpt_fault f[CKPT_FAULT_MAX];
} ckpt_faults;

/* Parses spec (may be NULL or empty). Returns 0 or -CKPT_ECONFIG. */
int ckpt__faults_parse(ckpt_faults *fs, const char *spec);
/* Called at a named point: 0 to go on, -CKPT_EFAULT_INJECTED when armed with
 * "error"; does not return when armed with "kill". */
int ckpt__fault(ckpt_faults *fs, const char *point);

#endif
