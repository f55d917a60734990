/* Preemption in a rank (preempt.c). Internal. */
#ifndef CKPT_PREEMPT_H
#define CKPT_PREEMPT_H

#include <stdint.h>

struct ckpt_ctx;

/* The emergency checkpoint of a rank, one per context (ctx->em, under
 * step_mu). Its transitions, and who makes them:
 *
 *   NONE ──notice, no agent told (raise_notice): local, next step, LOCAL_DISK──> WAIT
 *   any  ──EMERGENCY for a new step (ckpt__preempt_emergency)──────────────────> WAIT
 *   WAIT ──ckpt_step reaches the emergency step: it says SAVE───────────────────> SAVING
 *   WAIT, SAVING ──local: that version committed at the emergency's tier
 *                  (ckpt__preempt_committed); with an agent: EMERGENCY FINAL
 *                  for that step (the coordinator alone knows every copy)──────> SAFE
 *
 * A repeated EMERGENCY for the same step from the coordinator only moves the
 * deadline. In every state but NONE, ckpt_step says EXIT once the state is
 * SAFE or the deadline (less preempt_exit_margin_ms) is near, and otherwise
 * CONTINUE: no interval saves while an emergency runs. */
typedef enum ckpt_em_state {
	CKPT_EM_NONE = 0, /* no emergency */
	CKPT_EM_WAIT,     /* a step chosen; ckpt_step has not reached it */
	CKPT_EM_SAVING,   /* ckpt_step said SAVE at that step */
	CKPT_EM_SAFE,     /* its version is safe: ckpt_step says EXIT */
} ckpt_em_state;

/* Why ckpt_step first said EXIT (it is logged once). */
enum { CKPT_EM_EXIT_SAFE = 1, CKPT_EM_EXIT_LATE = 2 };

typedef struct ckpt_emergency {
	ckpt_em_state state;
	int local;          /* raised here without an agent: the local index says when it is safe */
	int exit_said;      /* 0, or CKPT_EM_EXIT_*: ckpt_step has said EXIT, and why */
	uint64_t step;      /* the version to save */
	uint64_t deadline;  /* CLOCK_REALTIME ns */
	uint32_t tier;      /* where it must be committed (local emergencies) */
} ckpt_emergency;

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
 * it would be otherwise). *say_exit becomes CKPT_EM_EXIT_* the first time
 * it says EXIT (for ckpt_step to log, unlocked), and stays 0 otherwise. */
int ckpt__preempt_step(struct ckpt_ctx *ctx, uint64_t step, int act, int *say_exit);

#endif
