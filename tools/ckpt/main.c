/* ckpt: list, inspect, verify, restore and maintain checkpoints. */
#include "cli.h"
#include "base/parse.h"
#include "s3.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: ckpt <command> [options]\n\n"
	        "commands:\n");
	for (const cli_cmd *c = cli_cmds; c->name; c++)
		fprintf(out, "  %-9s %s\n", c->name, c->summary);
	fprintf(out,
	        "\ncommon options:\n"
	        "  --root DIR        checkpoint root (or CKPT_ROOT)\n"
	        "  --job J           job id (or CKPT_JOB)\n"
	        "  --version V       a version number, 'latest' (or 'all' where it applies)\n"
	        "  --rank R          one rank (default: all ranks)\n"
	        "  --json            machine-readable output\n"
	        "  --daemon ADDR     work through ckptd at unix:/path or host:port (or CKPT_DAEMON):\n"
	        "                    ls, show, verify, restore, rm, gc, status, stragglers, goodput,\n"
	        "                    preempt, events, recoveries; save joins the agent with --root as well;\n"
	        "                    not reindex\n"
	        "  --token-file FILE with --daemon: 0600 token file (or CKPT_TOKEN_FILE, else CKPT_TOKEN)\n"
	        "  --help            help of a command: ckpt <command> --help\n\n"
	        "other:\n"
	        "  ckpt --version        library and format versions\n"
	        "  ckpt --help-config    every library setting, its variable and default\n\n"
	        "exit codes: 0 success, 1 error, 2 usage error, 3 corruption found, 4 not found\n");
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "ckpt %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see 'ckpt %s --help')\n", cmd);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("ckpt %s (shard format %u, index schema %u)\n", ckpt_version(), CKPT_FORMAT_VERSION,
		       CKPT_INDEX_SCHEMA);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--help-config")) {
		ckpt_config_help(stdout);
		printf("\nAlso read by the tools:\n"
		       "%-16s %-20s %-12s %s\n%-16s %-20s %-12s %s\n%-16s %-20s %-12s %s\n",
		       "", "CKPT_PYTHON", "python3", "the python that runs the plotting scripts (--plot)",
		       "", "CKPT_GOODPUT_PLOTTER", "-", "ckpt goodput --plot's script (unset: share/ckpt/plot_timeline.py)",
		       "", "CKPT_SIM_PLOTTER", "-", "ckpt-sim --plot's script (unset: share/ckpt/plot_goodput.py)");
		printf("\nThe S3 client (s3:// roots; credentials as AWS tools take them):\n");
		ckpt_s3_env_help(stdout);
		return EXIT_OK;
	}
	for (const cli_cmd *c = cli_cmds; c->name; c++) {
		if (strcmp(c->name, argv[1]))
			continue;
		for (int i = 2; i < argc; i++)
			if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
				c->help(stdout);
				return EXIT_OK;
			}
		/* The defaults of --root, --job, --daemon, --token-file, --shared-dir and the fault
		 * points: the library's settings table reads the environment. A
		 * malformed setting the command does not use is the library's to
		 * report when a context opens (save). */
		ckpt_config env;
		ckpt_config_init(&env);
		cli st = { .root = env.root, .job = env.job_id, .daemon = env.daemon, .token_file = env.token_file,
		           .shared_dir = env.shared_dir, .version = VERSION_UNSET, .rank = -1 };
		ckpt__logger_init(&st.lg, NULL, -1);
		if (ckpt__faults_parse(&st.faults, env.faults) < 0)
			return cli_usage(c->name, "CKPT_FAULT is malformed");
		int rc = c->run(&st, argc - 1, argv + 1);
		ckpt__index_close(st.ix);
		return rc;
	}
	fprintf(stderr, "ckpt: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
