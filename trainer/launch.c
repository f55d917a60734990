/* The launcher: starts the rank processes, agrees with them on the version
 * they resume from, watches them, and prints the final digest. A rank that
 * dies takes the job down (as it would on a cluster); the ranks die with
 * the launcher (PR_SET_PDEATHSIG), so a kill -9 of the launcher leaves no
 * orphans behind. SIGTERM and SIGUSR1 to the launcher (Kubernetes and
 * systemd signal the main process, Slurm the job step) are passed on to the
 * ranks, whose preemption handlers make them save and leave; the launcher
 * then says "preempted at step S" and exits 0, and the same command run
 * again resumes. */
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define TR_ID_MAX 256

typedef struct rank_slot {
	pid_t pid;
	int exited, status;
	int hello, done;
	tr_wire_hello h;
	uint8_t id[TR_ID_MAX]; /* the ROUTER identity of its control socket */
	size_t idlen;
	tr_done d;
} rank_slot;

typedef struct launcher {
	const tr_opts *o;
	void *zctx, *router;
	char endpoint[TR_EP_MAX];
	rank_slot *r;
	uint32_t hellos, dones, exited;
	int welcomed;
} launcher;

static volatile sig_atomic_t pass_on; /* a signal to pass on to the ranks */

static void on_signal(int sig)
{
	pass_on = sig;
}

static void kill_all(launcher *L)
{
	for (uint32_t i = 0; i < L->o->ranks; i++)
		if (L->r[i].pid > 0 && !L->r[i].exited)
			kill(L->r[i].pid, SIGKILL);
}

static int spawn(launcher *L, int argc, char **argv)
{
	char rank[16], inc[32];
	/* Every launch gets its own incarnation, so libckpt can tell this
	 * run's shards from those a crashed run left in a pending version. */
	uint64_t incarnation = L->o->incarnation;
	if (!getenv("CKPT_INCARNATION") && !incarnation) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		incarnation = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
		              ((uint64_t)getpid() << 40);
	}
	snprintf(inc, sizeof(inc), "%" PRIu64, incarnation);
	char **cargv = calloc((size_t)argc + 8, sizeof(*cargv));
	if (!cargv)
		return -ENOMEM;
	int n = 0;
	for (int i = 0; i < argc; i++)
		cargv[n++] = argv[i];
	cargv[n++] = "--coord";
	cargv[n++] = L->endpoint;
	cargv[n++] = "--rank";
	cargv[n++] = rank;
	if (!getenv("CKPT_INCARNATION")) {
		cargv[n++] = "--incarnation";
		cargv[n++] = inc;
	}
	cargv[n] = NULL;
	pid_t self = getpid();
	fflush(NULL);
	for (uint32_t r = 0; r < L->o->ranks; r++) {
		snprintf(rank, sizeof(rank), "%u", r);
		pid_t pid = fork();
		if (pid < 0) {
			int e = errno;
			free(cargv);
			return -e;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(TR_EXIT_FAIL);
			execv("/proc/self/exe", cargv);
			_exit(127);
		}
		L->r[r].pid = pid;
	}
	free(cargv);
	return 0;
}

static int send_welcomes(launcher *L)
{
	const tr_opts *o = L->o;
	tr_wire_welcome ww = { .type = TR_MSG_WELCOME };
	/* All ranks must hold one version: the oldest any of them restored (a
	 * rank that found none means a fresh start for all). */
	ww.w.restored = 1;
	ww.w.version = UINT64_MAX;
	for (uint32_t i = 0; i < o->ranks; i++) {
		const tr_hello *h = &L->r[i].h.h;
		if (!h->restored)
			ww.w.restored = 0;
		else if (h->version < ww.w.version)
			ww.w.version = h->version;
		if (h->has_nccl_id) {
			ww.w.has_nccl_id = 1;
			memcpy(ww.w.nccl_id, h->nccl_id, TR_NCCL_ID_BYTES);
		}
	}
	int mixed = 0;
	for (uint32_t i = 0; i < o->ranks; i++) {
		const tr_hello *h = &L->r[i].h.h;
		mixed |= h->restored != ww.w.restored || (h->restored && h->version != ww.w.version);
	}
	if (!ww.w.restored)
		ww.w.version = 0;
	if (mixed)
		printf("warning: ranks restored different versions; all use %s\n",
		       ww.w.restored ? "the oldest" : "a fresh start");
	if (ww.w.restored)
		printf("resumed from step %" PRIu64 "\n", ww.w.version);
	else
		printf("starting fresh (no committed checkpoint of job %s)\n", o->job);
	fflush(stdout);

	size_t len = sizeof(ww) + (size_t)o->ranks * TR_EP_MAX;
	uint8_t *buf = calloc(1, len);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, &ww, sizeof(ww));
	for (uint32_t i = 0; i < o->ranks; i++)
		memcpy(buf + sizeof(ww) + (size_t)i * TR_EP_MAX, L->r[i].h.endpoint, TR_EP_MAX);
	int err = 0;
	for (uint32_t i = 0; i < o->ranks && !err; i++)
		if (tr_zsend(L->router, L->r[i].id, L->r[i].idlen, ZMQ_SNDMORE) < 0 ||
		    tr_zsend(L->router, buf, len, 0) < 0)
			err = -EIO;
	free(buf);
	return err;
}

/* One message from a rank: [identity][payload]. */
static int on_message(launcher *L)
{
	uint8_t id[TR_ID_MAX];
	int idlen = tr_zrecv(L->router, id, sizeof(id), ZMQ_DONTWAIT);
	if (idlen < 0)
		return zmq_errno() == EAGAIN ? 1 : -EIO;
	zmq_msg_t msg;
	zmq_msg_init(&msg);
	if (tr_zmsg_recv(&msg, L->router) < 0) {
		zmq_msg_close(&msg);
		return -EIO;
	}
	const uint8_t *p = zmq_msg_data(&msg);
	size_t n = zmq_msg_size(&msg);
	uint32_t type = 0;
	if (n >= 4)
		memcpy(&type, p, 4);
	int err = 0;
	if (type == TR_MSG_HELLO && n == sizeof(tr_wire_hello)) {
		tr_wire_hello h;
		memcpy(&h, p, sizeof(h));
		if (h.h.rank >= L->o->ranks || L->r[h.h.rank].hello || (size_t)idlen > TR_ID_MAX) {
			err = -EPROTO;
		} else {
			rank_slot *s = &L->r[h.h.rank];
			s->h = h;
			s->h.endpoint[TR_EP_MAX - 1] = '\0';
			memcpy(s->id, id, (size_t)idlen);
			s->idlen = (size_t)idlen;
			s->hello = 1;
			L->hellos++;
		}
	} else if (type == TR_MSG_DONE && n == sizeof(tr_wire_done)) {
		tr_wire_done d;
		memcpy(&d, p, sizeof(d));
		if (d.d.rank >= L->o->ranks || L->r[d.d.rank].done) {
			err = -EPROTO;
		} else {
			L->r[d.d.rank].d = d.d;
			L->r[d.d.rank].done = 1;
			L->dones++;
		}
	} else {
		err = -EPROTO;
	}
	zmq_msg_close(&msg);
	if (err)
		fprintf(stderr, "trainer: unexpected message from a rank\n");
	return err;
}

static int reap(launcher *L, int *failed)
{
	int st;
	pid_t pid;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (uint32_t i = 0; i < L->o->ranks; i++) {
			rank_slot *s = &L->r[i];
			if (s->pid != pid)
				continue;
			s->exited = 1;
			s->status = st;
			L->exited++;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				break;
			if (!*failed) {
				if (WIFSIGNALED(st))
					fprintf(stderr, "trainer: rank %u killed by signal %d\n", i, WTERMSIG(st));
				else
					fprintf(stderr, "trainer: rank %u exited with status %d\n", i,
					        WEXITSTATUS(st));
				*failed = WIFEXITED(st) && WEXITSTATUS(st) == TR_EXIT_SKIP ? TR_EXIT_SKIP
				                                                          : TR_EXIT_FAIL;
			}
		}
	}
	return 0;
}

int tr_launch(const tr_opts *o, int argc, char **argv)
{
	int rc = TR_EXIT_FAIL;
	launcher L = { .o = o };
	if (o->device == TR_DEV_CUDA) {
		char why[256] = "";
		int ndev = 0;
		if (!tr_cuda_probe(&ndev, why, sizeof(why))) {
			fprintf(stderr, "trainer: --device cuda: %s\n", why);
			return TR_EXIT_SKIP;
		}
	}
	tr_model m;
	tr_model_layout(&m, o->context, o->embed, o->hidden);
	printf("trainer: %u ranks (%s), %zu parameters, global batch %u, %" PRIu64
	       " steps, seed %" PRIu64 ", job %s\n",
	       o->ranks, tr_dev_name(o->device), m.nparams, o->batch, o->steps, o->seed, o->job);
	fflush(stdout);

	L.r = calloc(o->ranks, sizeof(*L.r));
	if (!L.r || !(L.zctx = zmq_ctx_new()) || !(L.router = zmq_socket(L.zctx, ZMQ_ROUTER)))
		goto out;
	int linger = 1000;
	zmq_setsockopt(L.router, ZMQ_LINGER, &linger, sizeof(linger));
	size_t eplen = sizeof(L.endpoint);
	if (zmq_bind(L.router, "tcp://127.0.0.1:*") < 0 ||
	    zmq_getsockopt(L.router, ZMQ_LAST_ENDPOINT, L.endpoint, &eplen) < 0) {
		fprintf(stderr, "trainer: control socket: %s\n", zmq_strerror(zmq_errno()));
		goto out;
	}
	if (spawn(&L, argc, argv) < 0) {
		perror("trainer: fork");
		kill_all(&L);
		goto out_wait;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	int failed = 0;
	while (L.exited < o->ranks) {
		int sig = pass_on;
		if (sig) {
			pass_on = 0;
			fprintf(stderr, "trainer: signal %d: passed on to the ranks (they save and leave)\n", sig);
			for (uint32_t i = 0; i < o->ranks; i++)
				if (L.r[i].pid > 0 && !L.r[i].exited)
					kill(L.r[i].pid, sig);
		}
		zmq_pollitem_t pi = { .socket = L.router, .events = ZMQ_POLLIN };
		if (zmq_poll(&pi, 1, 50) > 0) {
			int r;
			while ((r = on_message(&L)) == 0)
				;
			if (r < 0 && !failed)
				failed = TR_EXIT_FAIL;
		}
		if (!L.welcomed && L.hellos == o->ranks && !failed) {
			if (send_welcomes(&L) < 0)
				failed = TR_EXIT_FAIL;
			L.welcomed = 1;
		}
		reap(&L, &failed);
		if (failed)
			kill_all(&L);
	}
	/* A report sent just before its rank exited may still be on its way
	 * through the sockets. */
	for (int waited = 0; !failed && L.dones < o->ranks && waited < 5000; waited += 50) {
		zmq_pollitem_t pi = { .socket = L.router, .events = ZMQ_POLLIN };
		if (zmq_poll(&pi, 1, 50) > 0)
			for (int r; (r = on_message(&L)) == 0;)
				;
	}
	if (failed) {
		rc = failed;
		goto out;
	}
	if (L.dones != o->ranks) {
		fprintf(stderr, "trainer: %u of %u ranks reported\n", L.dones, o->ranks);
		goto out;
	}
	if (L.r[0].d.preempted) {
		/* Every rank left at the same step, its state committed. */
		rc = TR_EXIT_OK;
		for (uint32_t i = 0; i < o->ranks; i++)
			if (!L.r[i].d.preempted || L.r[i].d.step != L.r[0].d.step) {
				fprintf(stderr, "trainer: rank %u left at another step than rank 0\n", i);
				rc = TR_EXIT_FAIL;
			}
		if (rc == TR_EXIT_OK)
			printf("preempted at step %" PRIu64 ": run the same command again to resume\n", L.r[0].d.step);
		goto out;
	}
	uint64_t *dig = calloc(o->ranks, sizeof(*dig));
	if (!dig)
		goto out;
	rc = TR_EXIT_OK;
	for (uint32_t i = 0; i < o->ranks; i++) {
		dig[i] = L.r[i].d.digest;
		if (L.r[i].d.weights_digest != L.r[0].d.weights_digest ||
		    L.r[i].d.step != L.r[0].d.step) {
			fprintf(stderr, "trainer: rank %u ends with other weights than rank 0\n", i);
			rc = TR_EXIT_FAIL;
		}
	}
	if (rc == TR_EXIT_OK)
		printf("final-digest %016" PRIx64 "\n",
		       tr_hash64(dig, o->ranks * sizeof(*dig), 0x747261696e6572ull));
	free(dig);
	goto out;
out_wait:
	for (uint32_t i = 0; i < o->ranks; i++)
		if (L.r[i].pid > 0)
			waitpid(L.r[i].pid, NULL, 0);
out:
	fflush(stdout);
	if (L.router)
		zmq_close(L.router);
	if (L.zctx)
		zmq_ctx_term(L.zctx);
	free(L.r);
	return rc;
}
