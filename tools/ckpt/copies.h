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
/* Matching agents' answers to the copy list in time bounded by their
 * sizes (copies_match.c), whatever a coordinator or an agent sends.
 * [out] ix: indices of cp sorted by node, rank, tier (free() it), so that
 * one node's copies are ix[lo..hi). Returns 0 or -ENOMEM. */
int cli_copies_sort(const cli_copy *cp, size_t n, size_t **ix);
/* The end of the run of ix starting at lo whose copies share its node. */
size_t cli_copies_node_end(const cli_copy *cp, const size_t *ix, size_t n, size_t lo);
/* In one node's run ix[lo..hi): the first copy of rank at tier, or NULL
 * (binary search). */
cli_copy *cli_copies_find(cli_copy *cp, const size_t *ix, size_t lo, size_t hi, uint32_t rank, uint32_t tier);
/* After the answers: each copy listed again (same node, rank and tier)
 * takes the result of its first listing. */
void cli_copies_dups(cli_copy *cp, const size_t *ix, size_t lo, size_t hi);

/* The job's newest version with a copy at any tier, by the coordinator. */
int cli_daemon_latest(cli *c, const char *cmd, struct ckptd_client *cl, uint64_t *out);

#endif
