/* ckpt-sim --plot: hands the report to tools/sim/plot_goodput.py, run by a
 * python3 that has matplotlib. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The plotting script: $env_var, else share/ckpt/name next to this
 * program's bin/ (the build tree and the install tree have the same
 * layout). */
static int find_plotter(const char *env_var, const char *name, char *out, size_t n)
{
	const char *env = getenv(env_var);
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return access(out, R_OK);
	}
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len < 0)
		return -1;
	exe[len] = '\0';
	snprintf(out, n, "%s/../share/ckpt/%s", dirname(exe), name);
	return access(out, R_OK);
}

/* Runs python with args (NULL-terminated, after the interpreter's name);
 * returns its exit status, 127 when it could not be started, -1 on a local
 * error. quiet: its output goes to /dev/null. */
static int run_python(const char *python, const char *const *args, int quiet)
{
	const char *argv[8] = { python };
	for (unsigned i = 0; args[i] && i + 2 < sizeof(argv) / sizeof(argv[0]); i++)
		argv[i + 1] = args[i];
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (quiet) {
			int fd = open("/dev/null", O_WRONLY);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2);
			}
		}
		execvp(python, (char *const *)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int sim_plot(const char *png, const char *json_text)
{
	return tool_plot("ckpt-sim", "CKPT_SIM_PLOTTER", "plot_goodput.py", png, json_text);
}

int tool_plot(const char *prog, const char *env_var, const char *name, const char *png, const char *json_text)
{
	char script[PATH_MAX + 64];
	if (find_plotter(env_var, name, script, sizeof(script)) < 0) {
		fprintf(stderr, "%s: --plot: the plotting script is not at %s (set %s to its path)\n", prog, script,
		        env_var);
		return -1;
	}
	/* $CKPT_PYTHON, else the python3 on PATH, else Debian's (where its
	 * python3-matplotlib is when PATH leads to another python): the
	 * first that imports matplotlib. */
	const char *env = getenv("CKPT_PYTHON");
	const char *cands[] = { env && *env ? env : "python3", "/usr/bin/python3" };
	unsigned ncand = env && *env ? 1 : 2;
	const char *python = NULL;
	static const char *const probe[] = { "-c", "import matplotlib", NULL };
	for (unsigned i = 0; i < ncand && !python; i++)
		if (run_python(cands[i], probe, 1) == 0)
			python = cands[i];
	if (!python) {
		fprintf(stderr, "%s: --plot: needs python3 with matplotlib (Debian: apt-get install "
		                "python3-matplotlib, or set CKPT_PYTHON to a python that has it)\n", prog);
		return -1;
	}
	const char *tmpdir = getenv("TMPDIR");
	char in[PATH_MAX];
	snprintf(in, sizeof(in), "%s/ckpt-plot-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	int fd = mkstemp(in);
	if (fd < 0) {
		fprintf(stderr, "%s: --plot: temporary file %s: %s\n", prog, in, strerror(errno));
		return -1;
	}
	size_t len = strlen(json_text);
	ssize_t w = write(fd, json_text, len);
	if (close(fd) < 0 || w != (ssize_t)len) {
		fprintf(stderr, "%s: --plot: writing %s failed\n", prog, in);
		unlink(in);
		return -1;
	}
	const char *const args[] = { script, "--in", in, "--out", png, NULL };
	int st = run_python(python, args, 0);
	unlink(in);
	if (st != 0) {
		fprintf(stderr, "%s: --plot %s: %s %s exited %d\n", prog, png, python, script, st);
		return -1;
	}
	return 0;
}
