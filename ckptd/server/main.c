/* ckptd: settings, the secret, the server; the roles plug their handlers
 * in here (README.md). Exit 0 on a clean stop, 1 on a runtime failure,
 * 2 on bad settings. */
#include "config.h"
#include "log.h"
#include "roles/roles.h"
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	ckptd_config cfg;
	ckptd_secret *secret = NULL;
	ckptd_server *srv = NULL;
	ckptd_roles *roles = NULL;
	char err[1200] = "";
	int rc = 2;
	int action = ckptd_config_parse(&cfg, argc, argv, err, sizeof(err));
	if (action < 0) {
		fprintf(stderr, "ckptd: %s\n", err);
		goto out;
	}
	if (action == CKPTD_CFG_HELP) {
		ckptd_config_help(stdout);
		rc = 0;
		goto out;
	}
	if (action == CKPTD_CFG_VERSION) {
		printf("ckptd %d.%d.%d, protocol %d.%d\n", CKPT_VERSION_MAJOR, CKPT_VERSION_MINOR, CKPT_VERSION_PATCH,
		       CKPTD_PROTO_MAJOR, CKPTD_PROTO_MINOR);
		rc = 0;
		goto out;
	}
	if (action == CKPTD_CFG_PRINT) {
		ckptd_config_print(&cfg, stdout);
		rc = 0;
		goto out;
	}
	ckptd_log log = { .level = cfg.log_level, .out = stderr };

	int r;
	if (cfg.token_file)
		r = ckptd_secret_load_file(cfg.token_file, &secret, err, sizeof(err));
	else
		r = ckptd_secret_load_env(CKPTD_TOKEN_ENV, &secret, err, sizeof(err));
	/* Children (none yet, but roles may spawn helpers) must not inherit it. */
	unsetenv(CKPTD_TOKEN_ENV);
	if (r == -ENOKEY) {
		fprintf(stderr, "ckptd: --token-file: no secret: set --token-file FILE (mode 0600) or CKPT_TOKEN\n");
		goto out;
	}
	if (r < 0) {
		fprintf(stderr, "ckptd: --token-file: %s\n", err[0] ? err : strerror(-r));
		goto out;
	}
	/* The roles keep their indexes (and an agent its disk tier) there. */
	if (!cfg.root) {
		fprintf(stderr, "ckptd: --root DIR is required (the daemon's LMDB index and disk tier; or CKPT_ROOT)\n");
		rc = 2;
		goto out;
	}
	r = ckptd_server_new(&cfg, secret, &log, &srv, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "ckptd: %s\n", err);
		rc = (r == -EINVAL) ? 2 : 1;
		goto out;
	}
	r = ckptd_roles_start(srv, &cfg, secret, &log, &roles, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "ckptd: %s\n", err[0] ? err : strerror(-r));
		rc = (r == -EINVAL) ? 2 : 1;
		goto out;
	}
	rc = ckptd_server_run(srv) == 0 ? 0 : 1;
out:
	/* Sessions first: their destructors still reach into the roles. */
	ckptd_server_free(srv);
	ckptd_roles_free(roles);
	ckptd_secret_free(secret);
	ckptd_config_free(&cfg);
	return rc;
}
