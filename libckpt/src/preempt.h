/* Preemption in a rank (preempt.c). Internal. */
#ifndef CKPT_PREEMPT_H
#define CKPT_PREEMPT_H

#include <stdint.h>

struct ckpt_ctx;

/* Names ("TERM,USR1") to signal numbers; returns how many, or -1. */
int ckpt__preempt_parse_signals(const char *s, int *out, int cap);
/* At close: the context leaves the armed table; signals no context uses any
 * more get their earlier handlers back. */
void ckpt__preempt_disarm(struct ckpt_ctx *ctx);
/* io thread: a signal that marked the context raises its notice. */
void ckpt__preempt_poll(struct ckpt_ctx *ctx);
/* EMERGENCY from the coordinator (through the agent). */
/* final: the coordinator says the version is safe off the noticed nodes. */
void ckpt__preempt_emergency(struct ckpt_ctx *ctx, uint64_t step, uint64_t deadline_ns, uint32_t tier, int final);
/* Version committed at tiers (a COMMIT_NOTICE, or the local index). */
void ckpt__preempt_committed(struct ckpt_ctx *ctx, uint64_t version, uint32_t tiers);
/* ckpt_step, with step_mu held: the action during an emergency (act: what
 * it would be otherwise). */
int ckpt__preempt_step(struct ckpt_ctx *ctx, uint64_t step, int act);

#endif
