/* The embedded emergency (no agent), through the public API: a notice
 * makes the next step a SAVE and stops interval saves; EXIT follows once
 * that version is committed on local disk, or once the deadline is near
 * even though nothing was saved. These walk the state machine of
 * libckpt/src/preempt.h: NONE -> WAIT -> SAVING -> SAFE, and WAIT with the
 * deadline passed. */
#include "helpers.h"
#include "ckpt.h"

#include <time.h>

static ckpt_ctx *open_ctx(const char *root, const char *job, uint8_t *buf, size_t n)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = job;
	cfg.interval = "2";
	cfg.preempt_exit_margin_ms = 1000;
	ckpt_ctx *ctx;
	T_OK(ckpt_ctx_open(&cfg, &ctx));
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "state", buf, n);
	T_OK(ckpt_region_add(ctx, &d));
	return ctx;
}

/* Saves version v and waits until it is committed on local disk. */
static void save_committed(ckpt_ctx *ctx, uint64_t v)
{
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, v, 0, &h));
	ckpt_status st = { .size = sizeof(st) };
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, 60000, &st));
	T_ASSERT(st.committed == 1);
	ckpt_handle_free(h);
}

/* Notice after step 3: step 4 says SAVE, later steps CONTINUE (no interval
 * save at 6) until 4 is committed, then EXIT, and EXIT from then on. */
static void committed_then_exit(const char *root)
{
	static uint8_t buf[100000];
	t_fill(buf, sizeof(buf), 1);
	ckpt_ctx *ctx = open_ctx(root, "local", buf, sizeof(buf));
	T_ASSERT(ckpt_step(ctx, 1) == CKPT_STEP_CONTINUE);
	T_ASSERT(ckpt_step(ctx, 2) == CKPT_STEP_SAVE); /* the interval, before any notice */
	T_ASSERT(ckpt_step(ctx, 3) == CKPT_STEP_CONTINUE);
	T_OK(ckpt_preempt_notice(ctx, t_wall_ns() + 60ull * 1000000000ull));
	T_ASSERT(ckpt_step(ctx, 4) == CKPT_STEP_SAVE);
	/* Not saved yet: no EXIT, and no interval save at step 6 either. */
	T_ASSERT(ckpt_step(ctx, 5) == CKPT_STEP_CONTINUE);
	T_ASSERT(ckpt_step(ctx, 6) == CKPT_STEP_CONTINUE);
	save_committed(ctx, 4);
	T_ASSERT(ckpt_step(ctx, 7) == CKPT_STEP_EXIT);
	T_ASSERT(ckpt_step(ctx, 8) == CKPT_STEP_EXIT);
	/* A second notice changes nothing: the emergency is under way. */
	T_OK(ckpt_preempt_notice(ctx, 0));
	T_ASSERT(ckpt_step(ctx, 9) == CKPT_STEP_EXIT);
	T_OK(ckpt_ctx_close(ctx));
}

/* A committed version other than the emergency's does not end it. */
static void other_version_no_exit(const char *root)
{
	static uint8_t buf[4096];
	ckpt_ctx *ctx = open_ctx(root, "other", buf, sizeof(buf));
	T_ASSERT(ckpt_step(ctx, 1) == CKPT_STEP_CONTINUE);
	T_OK(ckpt_preempt_notice(ctx, t_wall_ns() + 60ull * 1000000000ull));
	save_committed(ctx, 1);
	T_ASSERT(ckpt_step(ctx, 2) == CKPT_STEP_SAVE);
	T_ASSERT(ckpt_step(ctx, 3) == CKPT_STEP_CONTINUE);
	T_OK(ckpt_ctx_close(ctx));
}

/* A deadline inside the exit margin: EXIT at once, with nothing saved. */
static void deadline_exit(const char *root)
{
	static uint8_t buf[4096];
	ckpt_ctx *ctx = open_ctx(root, "late", buf, sizeof(buf));
	T_ASSERT(ckpt_step(ctx, 9) == CKPT_STEP_CONTINUE);
	T_OK(ckpt_preempt_notice(ctx, t_wall_ns() + 100ull * 1000000ull)); /* 0.1 s, margin 1 s */
	T_ASSERT(ckpt_step(ctx, 10) == CKPT_STEP_EXIT);
	T_ASSERT(ckpt_step(ctx, 11) == CKPT_STEP_EXIT);
	T_OK(ckpt_ctx_close(ctx));
}

int main(void)
{
	setenv("CKPT_DEBUG", "ERROR", 1);
	unsetenv("CKPT_DAEMON");
	char *root = t_tmpdir("preempt-local");
	committed_then_exit(root);
	other_version_no_exit(root);
	deadline_exit(root);
	T_ASSERT(ckpt_step(NULL, 1) == -EINVAL);
	t_rmrf(root);
	return T_EXIT_PASS;
}
