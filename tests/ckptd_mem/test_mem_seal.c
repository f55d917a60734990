/* A client holding the pool's fd cannot resize it (which would SIGBUS the
 * agent and every rank) nor add seals; the rank's map refuses an fd that is
 * not sealed against shrinking or too short. */
#include "mem_test.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "wire/fdpass.h"

/* What the client tries; each must fail with EPERM. Returns a bit per
 * attempt that succeeded or failed otherwise. */
static int client_attacks(int fd, off_t size)
{
	int bad = 0;
	char b = 1;
	if (ftruncate(fd, size / 2) == 0 || errno != EPERM)
		bad |= 1;
	if (ftruncate(fd, 0) == 0 || errno != EPERM)
		bad |= 2;
	if (ftruncate(fd, size * 2) == 0 || errno != EPERM)
		bad |= 4;
	if (fallocate(fd, 0, size, 4096) == 0 || errno != EPERM)
		bad |= 8;
	if (pwrite(fd, &b, 1, size) >= 0 || errno != EPERM)
		bad |= 16;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0 || errno != EPERM)
		bad |= 32;
#ifdef F_SEAL_FUTURE_WRITE
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0 || errno != EPERM)
		bad |= 64;
#endif
	/* A new open file description of the same memfd is sealed alike. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int fd2 = open(path, O_RDWR | O_CLOEXEC);
	if (fd2 >= 0) {
		if (ftruncate(fd2, 0) == 0 || errno != EPERM)
			bad |= 128;
		close(fd2);
	}
	/* Writing inside the pool is allowed: that is what a rank does. */
	if (pwrite(fd, &b, 1, 0) != 1)
		bad |= 256;
	return bad;
}

/* On hugetlbfs the fd's page is 2 MiB (or more): segments and maps follow. */
static void huge_pool(void)
{
	ckptd_pool_opts o = { .size = sizeof(o), .bytes = 3 << 20, .huge = CKPTD_POOL_HUGE_ON };
	ckptd_pool *p = NULL;
	int err = ckptd_pool_open(&p, &o);
	if (err < 0) {
		printf("hugetlb pool not available here (%s): that part skipped\n", strerror(-err));
		return;
	}
	ckptd_pool_stats st;
	ckptd_pool_stats_get(p, &st);
	T_ASSERT(st.hugetlb && st.align >= (2 << 20) && st.bytes % st.align == 0 && st.bytes >= (3 << 20));
	int fd = ckptd_pool_fd(p);
	int seals = fcntl(fd, F_GET_SEALS);
	T_ASSERT(seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
	                       (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	T_ASSERT(ftruncate(fd, 0) < 0 && errno == EPERM);
	ckptd_seg_info a, b;
	M_OK(ckptd_pool_alloc(p, "h", 1, 0, 100, &a));
	M_OK(ckptd_pool_alloc(p, "h", 1, 1, 100, &b));
	T_ASSERT(a.cap == st.align && b.off == st.align);
	ckptd_mapping m;
	M_OK(ckptd_seg_map(fd, b.off + 100, 5000, CKPTD_MAP_WRITE | CKPTD_MAP_POPULATE, &m));
	T_ASSERT(m.map_len == st.align && ((uintptr_t)m.map_addr % st.align) == 0);
	memset(m.addr, 0x3c, 5000);
	uint8_t *base = ckptd_pool_base(p);
	T_ASSERT(base[b.off + 100] == 0x3c && base[b.off + 5099] == 0x3c && base[b.off + 5100] == 0);
	M_OK(ckptd_seg_unmap(&m));
	/* One mapping of the whole pool, faulted in per grant. */
	M_OK(ckptd_seg_map(fd, 0, st.bytes, CKPTD_MAP_WRITE, &m));
	M_OK(ckptd_seg_prefault(&m, b.off + 100, 5000, 1));
	T_ASSERT(((uint8_t *)m.addr)[b.off + 100] == 0x3c);
	M_OK(ckptd_seg_unmap(&m));
	printf("hugetlb pool: %llu MiB in %llu KiB pages\n", (unsigned long long)(st.bytes >> 20),
	       (unsigned long long)(st.align >> 10));
	ckptd_pool_close(p);
}

int main(void)
{
	huge_pool();
	ckptd_pool *p = m_pool(1 << 20, 0, NULL, NULL);
	int fd = ckptd_pool_fd(p);
	struct stat st;
	M_OK(fstat(fd, &st) < 0 ? -errno : 0);
	T_ASSERT(st.st_size == 1 << 20);
	int seals = fcntl(fd, F_GET_SEALS);
	T_ASSERT(seals >= 0);
	T_ASSERT((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
	         (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	T_ASSERT(!(seals & F_SEAL_WRITE));
	T_ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);

	/* The client gets the fd as a rank would: over a socket. */
	int sv[2];
	M_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ? -errno : 0);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		char msg[4];
		int cfd;
		if (ckptd_fdpass_recv(sv[1], msg, sizeof(msg), &cfd, 10000) != (ssize_t)sizeof(msg) || cfd < 0)
			_exit(200);
		int bad = client_attacks(cfd, (off_t)(1 << 20));
		_exit(bad > 255 ? 255 : bad);
	}
	close(sv[1]);
	M_OK(ckptd_fdpass_send(sv[0], "SEAL", 4, fd, 10000));
	int status;
	T_ASSERT(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		T_FAIL("client could change the pool: status %#x (bits: 1,2 shrink, 4 grow, 8 fallocate, "
		       "16 write past end, 32/64 add seal, 128 reopen+truncate, 255 write inside)", status);
	close(sv[0]);
	/* Same checks here, in the agent itself. */
	int bad = client_attacks(fd, (off_t)(1 << 20));
	if (bad)
		T_FAIL("agent-side attacks: bits %#x", bad);
	M_OK(fstat(fd, &st) < 0 ? -errno : 0);
	T_ASSERT(st.st_size == 1 << 20);

	/* Mapping: unaligned offsets are fine, ranges past the end are not. */
	uint8_t *base = ckptd_pool_base(p);
	for (int i = 0; i < 8192; i++)
		base[i] = (uint8_t)(i * 7);
	ckptd_mapping m;
	M_OK(ckptd_seg_map(fd, 100, 5000, 0, &m));
	T_ASSERT(memcmp(m.addr, base + 100, 5000) == 0 && m.len == 5000);
	T_ASSERT(((uintptr_t)m.map_addr & 4095) == 0 && m.map_len == 8192);
	M_OK(ckptd_seg_unmap(&m));
	T_ASSERT(m.map_addr == NULL);
	M_OK(ckptd_seg_unmap(&m));
	M_ERR(ckptd_seg_map(fd, (1 << 20) - 4096, 8192, 0, &m), -ERANGE);
	M_ERR(ckptd_seg_map(fd, UINT64_MAX - 10, 100, 0, &m), -EINVAL);
	M_ERR(ckptd_seg_map(fd, 0, 0, 0, &m), -EINVAL);
	M_ERR(ckptd_seg_map(fd, 0, 10, 0x100, &m), -EINVAL);
	M_OK(ckptd_seg_map(fd, (1 << 20) - 4096, 4096, CKPTD_MAP_WRITE | CKPTD_MAP_POPULATE, &m));
	memset(m.addr, 0xee, 4096);
	T_ASSERT(base[(1 << 20) - 1] == 0xee);
	M_OK(ckptd_seg_unmap(&m));

	/* A rank that keeps one mapping of the whole pool faults in each grant
	 * before its save. */
	M_OK(ckptd_seg_map(fd, 0, 1 << 20, CKPTD_MAP_WRITE, &m));
	M_OK(ckptd_seg_prefault(&m, 8192 + 10, 3 * 4096, 1));
	M_OK(ckptd_seg_prefault(&m, 0, 1 << 20, 0));
	M_OK(ckptd_seg_prefault(&m, 5, 0, 1));
	M_ERR(ckptd_seg_prefault(&m, (1 << 20) - 10, 11, 1), -ERANGE);
	M_ERR(ckptd_seg_prefault(&m, UINT64_MAX, 2, 1), -ERANGE);
	T_ASSERT(((uint8_t *)m.addr)[(1 << 20) - 1] == 0xee);
	M_OK(ckptd_seg_unmap(&m));
	M_ERR(ckptd_seg_prefault(&m, 0, 1, 1), -ERANGE);
	/* Built for writing by reads (shared memory needs no write
	 * notification): writing every page afterwards takes no page fault. */
	M_OK(ckptd_seg_map(fd, 0, 1 << 20, CKPTD_MAP_WRITE, &m));
	M_OK(ckptd_seg_prefault(&m, 0, 1 << 20, 1));
	struct rusage ru0, ru1;
	T_ASSERT(getrusage(RUSAGE_THREAD, &ru0) == 0);
	volatile uint8_t *wp = m.addr;
	for (size_t i = 0; i < (1u << 20); i += 4096)
		wp[i] = wp[i];
	T_ASSERT(getrusage(RUSAGE_THREAD, &ru1) == 0);
	/* Under ASan the loop also faults in its shadow: 1/8 of the bytes,
	 * anonymous memory, a fault a page. */
	long shadow = 0;
#if defined(__SANITIZE_ADDRESS__)
	shadow = (1 << 20) / 8 / 4096;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	shadow = (1 << 20) / 8 / 4096;
#endif
#endif
	if (ru1.ru_minflt - ru0.ru_minflt >= 16 + shadow)
		T_FAIL("writing 1 MiB after the prefault took %ld page faults (at most %ld expected)",
		       (long)(ru1.ru_minflt - ru0.ru_minflt), 15 + shadow);
	M_OK(ckptd_seg_unmap(&m));

	/* An fd that could shrink under the rank is refused. */
	int loose = memfd_create("loose", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	T_ASSERT(loose >= 0);
	T_ASSERT(ftruncate(loose, 1 << 16) == 0);
	M_ERR(ckptd_seg_map(loose, 0, 4096, 0, &m), -EPERM);
	T_ASSERT(fcntl(loose, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	M_OK(ckptd_seg_map(loose, 0, 4096, 0, &m));
	M_OK(ckptd_seg_unmap(&m));
	close(loose);
	/* Not a file at all. */
	int pp[2];
	T_ASSERT(pipe(pp) == 0);
	M_ERR(ckptd_seg_map(pp[0], 0, 4096, 0, &m), -EINVAL);
	close(pp[0]);
	close(pp[1]);

	ckptd_pool_close(p);
	printf("test_mem_seal: ok\n");
	return T_EXIT_PASS;
}
