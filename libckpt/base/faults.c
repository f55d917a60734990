#include "faults.h"
#include "common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ckpt__faults_parse(ckpt_faults *fs, const char *spec)
{
	memset(fs, 0, sizeof(*fs));
	if (!spec || !*spec)
		return 0;
	const char *p = spec;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char item[128];
		if (len == 0 || len >= sizeof(item) || fs->n >= CKPT_FAULT_MAX)
			return -CKPT_ECONFIG;
		memcpy(item, p, len);
		item[len] = 0;
		char *eq = strchr(item, '=');
		if (!eq || eq == item || (size_t)(eq - item) >= sizeof(fs->f[0].point))
			return -CKPT_ECONFIG;
		*eq = 0;
		ckpt_fault *f = &fs->f[fs->n];
		memcpy(f->point, item, (size_t)(eq - item) + 1);
		char *act = eq + 1;
		char *at = strchr(act, '@');
		if (at) {
			char *e;
			unsigned long n = strtoul(act, &e, 10);
			if (e != at || n == 0 || n > 1000000)
				return -CKPT_ECONFIG;
			f->nth = (uint32_t)n;
			act = at + 1;
		}
		if (!strcmp(act, "kill"))
			f->action = 1;
		else if (!strcmp(act, "error"))
			f->action = 2;
		else if (!strncmp(act, "delay:", 6)) {
			char *e;
			unsigned long ms = strtoul(act + 6, &e, 10);
			if (*e || ms > 600000)
				return -CKPT_ECONFIG;
			f->action = 3;
			f->delay_ms = (uint32_t)ms;
		} else
			return -CKPT_ECONFIG;
		fs->n++;
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

int ckpt__fault(ckpt_faults *fs, const char *point)
{
	if (!fs || fs->n == 0)
		return 0;
	for (int i = 0; i < fs->n; i++) {
		ckpt_fault *f = &fs->f[i];
		if (strcmp(f->point, point))
			continue;
		uint32_t hit = __atomic_add_fetch(&f->hits, 1, __ATOMIC_SEQ_CST);
		if (f->nth && hit != f->nth)
			continue;
		switch (f->action) {
		case 1:
			/* The line tells a test where the process died. */
			fprintf(stderr, "ckpt: fault point %s: kill\n", point);
			kill(getpid(), SIGKILL);
			for (;;)
				pause();
		case 2:
			return -CKPT_EFAULT_INJECTED;
		case 3: {
			struct timespec ts = { f->delay_ms / 1000, (long)(f->delay_ms % 1000) * 1000000L };
			/* The line tells a test the process has reached the point. */
			fprintf(stderr, "ckpt: fault point %s: delay %u ms\n", point, (unsigned)f->delay_ms);
			nanosleep(&ts, NULL);
			break;
		}
		}
	}
	return 0;
}
