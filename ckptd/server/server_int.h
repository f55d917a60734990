/* Internals of the ckptd server shared by its files (server.c: sessions,
 * handshake, dispatch, loop; listen.c: listening sockets). */
#ifndef CKPTD_SERVER_INT_H
#define CKPTD_SERVER_INT_H

/* The daemon's event loop: listeners, sessions, handshake, sealed frames,
 * output queues, deadlines and the handler table (server.h). */
#include "server.h"

#include "base/common.h"
#include "wire/addr.h"
#include "wire/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_HANDLERS 64
#define CLOSE_LINGER_NS (1000000000ull) /* time to flush a last ERROR */
#define READS_PER_EVENT 16              /* fairness: one peer cannot hog the loop */
#define MAX_WATCHES 16                  /* role fds: an agent has its coordinator link, five pipes of its threads (notices, prefetch, shared, rs encode, verifications) and one per job pool being made */
#define MAX_TIMERS 8
#define MAX_AFTER 4

enum { S_HELLO = 1, S_AUTH, S_READY };

typedef struct outbuf {
	struct outbuf *next;
	int fd; /* -1, or sent along with the first byte */
	size_t len, off;
	uint8_t data[];
} outbuf;

struct ckptd_session {
	ckptd_server *srv;
	ckptd_session *prev, *next;
	int fd;
	int transport;
	int state;
	int rx_any;     /* a byte has arrived */
	int closing;    /* reads no more; closes once flushed or at close_deadline */
	int throttled;  /* frames wait in the reader until the output drains */
	int resume;     /* drained: answer those frames in the next pass */
	uint32_t events; /* what epoll watches now */
	char peer[96];
	char peer_key[64];  /* what the per-peer handshake limit counts: IP address or uid */
	char job[CKPTD_JOB_MAX + 1];
	uint32_t role;
	int have_cred;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	ckptd_reader *reader;
	ckptd_auth *auth;
	outbuf *out_head, *out_tail;
	size_t out_bytes;
	uint64_t hs_deadline;    /* 0 once authenticated */
	uint64_t last_rx;        /* last complete frame, for the idle timeout */
	uint64_t out_deadline;   /* queued bytes must move by then; 0: queue empty */
	uint64_t close_deadline; /* 0 unless closing */
	const char *drop_why;
	void *data;
	void (*destroy)(void *);
};

struct ckptd_server {
	const ckptd_config *cfg;
	const ckptd_log *log;
	const ckptd_secret *cluster; /* borrowed */
	int epfd, sigfd, tcp_fd, unix_fd;
	sigset_t oldmask;
	int mask_set;
	dev_t sock_dev;
	ino_t sock_ino;
	int sock_ours;
	ckptd_session *live, *dead;
	uint32_t nlive;
	int resume; /* some session has s->resume set */
	struct {
		uint16_t type;
		ckptd_handler_fn fn;
		void *arg;
	} handlers[MAX_HANDLERS];
	size_t nhandlers;
	/* Role hooks: fds of their own, periodic timers, and calls after each
	 * batch of events (where a coordinator commits what the batch brought). */
	struct watch {
		int fd; /* -1: free slot */
		ckptd_watch_fn fn;
		void *arg;
	} watches[MAX_WATCHES];
	struct {
		uint64_t period_ns, due_ns;
		ckptd_hook_fn fn;
		void *arg;
	} timers[MAX_TIMERS];
	size_t ntimers;
	struct {
		ckptd_hook_fn fn;
		void *arg;
	} after[MAX_AFTER];
	size_t nafter;
	int stop;
	int stopping; /* begin_stop ran: connections close because the daemon goes */
	uint64_t started_ns;
	char node[CKPTD_NAME_MAX + 1];
	ckptd_metrics *metrics; /* its own lock: the HTTP thread reads it */
};

void ckptd__errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ckptd__listen_tcp(ckptd_server *srv, const char *spec, char *err, size_t errcap);
int ckptd__listen_unix(ckptd_server *srv, const char *path, char *err, size_t errcap);
void ckptd__remove_socket(ckptd_server *srv);
void ckptd__close_listeners(ckptd_server *srv);

#endif
