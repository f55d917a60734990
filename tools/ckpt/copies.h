/* The coordinator's record of a version's copies, as `ckpt verify --daemon`
 * and `ckpt restore --daemon` read it (cmd_daemon.c). */
#ifndef CKPT_CLI_COPIES_H
#define CKPT_CLI_COPIES_H

#include "cli.h"
#include "wire/proto.h"

/* One copy of one rank's shard. */
typedef struct cli_copy {
	uint32_t rank, tier;
	char node[CKPTD_NAME_MAX + 1];
	int live;
	int code; /* verify: -1 not verified yet; else CKPTD_VERIFY_* */
	char text[CKPTD_TEXT_MAX + 1];
} cli_copy;

/* Every copy of version v the coordinator knows, in rank order, its answer
 * checked: one world size on every page, every rank below it and in order.
 * *out (freed by the caller), *n copies; *listed: how many ranks it names a
 * copy of. Returns EXIT_OK or an exit code, having said why. */
int cli_collect_copies(cli *c, const char *cmd, struct ckptd_client *cl, uint64_t v, cli_copy **out, size_t *n,
                       uint32_t *world, uint32_t *listed);
/* The job's newest version with a copy at any tier, by the coordinator. */
int cli_daemon_latest(cli *c, const char *cmd, struct ckptd_client *cl, uint64_t *out);

#endif
