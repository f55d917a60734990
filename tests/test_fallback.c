/* Where the kernel refuses io_uring (a seccomp filter here, as container
 * runtimes install), the library falls back to pwrite with a warning and
 * saves and restores as before. */
#include "helpers.h"
#include "ckpt.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static void deny_io_uring(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		_exit(T_EXIT_SKIP);
	}
}

static int roundtrip(const char *root, const char *backend)
{
	ckpt_config cfg;
	T_OK(ckpt_config_init(&cfg));
	cfg.root = root;
	cfg.job_id = backend ? backend : "auto";
	cfg.backend = backend;
	cfg.chunk_bytes = 64 << 10;
	cfg.staging_bytes = 1 << 20;
	ckpt_ctx *ctx;
	int r = ckpt_ctx_open(&cfg, &ctx);
	if (r < 0)
		return r;
	size_t n = 700001;
	uint8_t *a = malloc(n), *b = malloc(n);
	t_fill(a, n, 42);
	memcpy(b, a, n);
	ckpt_region_desc d;
	ckpt_region_desc_init(&d, "x", b, n);
	T_OK(ckpt_region_add(ctx, &d));
	ckpt_handle *h;
	T_OK(ckpt_save(ctx, 1, 0, &h));
	T_OK(ckpt_handle_wait(h, CKPT_TIER_LOCAL_DISK, -1, NULL));
	ckpt_handle_free(h);
	memset(b, 0, n);
	T_OK(ckpt_restore(ctx, CKPT_LATEST, 0, NULL));
	T_ASSERT(!memcmp(a, b, n));
	T_OK(ckpt_ctx_close(ctx));
	free(a);
	free(b);
	return 0;
}

int main(void)
{
	char *root = t_tmpdir("fallback");
	/* The psync backend, asked for by name. */
	T_OK(roundtrip(root, "psync"));
	pid_t pid = fork();
	if (pid == 0) {
		deny_io_uring();
		/* uring by name now fails cleanly; auto falls back. */
		T_ERR(roundtrip(root, "uring"), -EPERM);
		T_OK(roundtrip(root, NULL));
		_exit(0);
	}
	int st;
	T_ASSERT(waitpid(pid, &st, 0) == pid);
	T_ASSERT(WIFEXITED(st));
	if (WEXITSTATUS(st) == T_EXIT_SKIP)
		return T_EXIT_SKIP;
	T_ASSERT(WEXITSTATUS(st) == 0);
	t_rmrf(root);
	printf("fallback: ok\n");
	return T_EXIT_PASS;
}
