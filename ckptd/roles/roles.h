/*
 * roles.h — the agent and coordinator roles of ckptd, plugged into the
 * server core (../server/server.h) by ckptd_roles_start.
 *
 * coordinator: the global commit (ckptd/coord) behind TCP: AGENT_HELLO,
 *   AGENT_INVENTORY, SHARD_DONE (drained into one batch per loop turn),
 *   COMMIT_NOTICE to the agents holding the job, LIST_VERSIONS, STATUS,
 *   agent loss after a grace period, a retention timer.
 * agent: the node-DRAM pool (ckptd/mem) behind the Unix socket:
 *   REGISTER_RANK, SEGMENT_REQUEST, SHARD_DONE; its own LMDB index of what it
 *   holds; a link to the coordinator (reconnect with backoff, AGENT_HELLO and
 *   a full AGENT_INVENTORY on every connect); COMMIT_NOTICE fan-out to ranks.
 * both: one process; the agent talks to its coordinator in-process (a
 *   loopback connection from the loop's own thread would deadlock on its
 *   own handshake).
 *
 * Single-threaded: everything runs in the server loop's thread.
 * No global state. Errors: 0 or a negative errno.
 */
#ifndef CKPTD_ROLES_H
#define CKPTD_ROLES_H

#include <stddef.h>

#include "wire/auth.h"
#include "server/config.h"
#include "server/log.h"
#include "server/server.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckptd_roles ckptd_roles;

/* Opens what cfg->roles asks for (indexes under cfg->root, the pool) and
 * registers the handlers, timers and hooks on srv. cfg, cluster and log are
 * borrowed and must outlive the roles; free the roles after the server.
 * [out] err, errcap: the reason on failure, for the operator.
 * Returns 0; -EINVAL (a needed setting is missing); -errno. */
int ckptd_roles_start(ckptd_server *srv, const ckptd_config *cfg, const ckptd_secret *cluster,
                      const ckptd_log *log, ckptd_roles **out, char *err, size_t errcap);

/* Frees; call after ckptd_server_free. NULL is accepted. */
void ckptd_roles_free(ckptd_roles *r);

#ifdef __cplusplus
}
#endif

#endif
