/* ckptd server core: sessions, handshake, dispatch, timers, the loop.
 * Listening sockets are in listen.c. */
#include "server_int.h"


static uint64_t ms_to_ns(uint64_t ms)
{
	return ms * 1000000ull;
}

void ckptd__errf(char *err, size_t cap, const char *fmt, ...)
{
	if (!err || !cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- epoll */

static int watch(ckptd_session *s, uint32_t events)
{
	if (s->fd < 0 || s->events == events)
		return 0;
	struct epoll_event ev = { .events = events, .data.ptr = s };
	if (epoll_ctl(s->srv->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
		return -errno;
	s->events = events;
	return 0;
}

/* Reading stops while the peer has too much unread output (backpressure)
 * or once the session is closing; writing is watched while bytes wait. */
static void update_watch(ckptd_session *s)
{
	uint32_t ev = 0;
	if (!s->closing && s->out_bytes < s->srv->cfg->out_queue)
		ev |= EPOLLIN;
	if (s->out_head)
		ev |= EPOLLOUT;
	watch(s, ev);
}

/* ---------------------------------------------------------------- sessions */

static void session_close(ckptd_session *s)
{
	ckptd_server *srv = s->srv;
	if (s->fd < 0)
		return;
	epoll_ctl(srv->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	s->fd = -1;
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->live = s->next;
	if (s->next)
		s->next->prev = s->prev;
	srv->nlive--;
	/* Freed after the current batch of events, which may still name it. */
	s->next = srv->dead;
	s->prev = NULL;
	srv->dead = s;
}

static void session_free(ckptd_session *s)
{
	if (s->destroy)
		s->destroy(s->data);
	for (outbuf *o = s->out_head, *n; o; o = n) {
		n = o->next;
		if (o->fd >= 0)
			close(o->fd);
		free(o);
	}
	ckptd_reader_free(s->reader);
	ckptd_auth_free(s->auth);
	free(s);
}

static void reap(ckptd_server *srv)
{
	for (ckptd_session *s = srv->dead, *n; s; s = n) {
		n = s->next;
		session_free(s);
	}
	srv->dead = NULL;
}

static int flush(ckptd_session *s);

/* Queues an encoded frame; seal: whether to seal it first. */
static int queue(ckptd_session *s, const ckptd_msg *m, int fd, int seal)
{
	if (s->fd < 0 || s->closing)
		return -EPIPE;
	long size = ckptd_msg_encoded_size(m);
	if (size < 0)
		return (int)size;
	/* A peer that leaves its replies unread cannot make us buffer more. */
	if (s->out_bytes + (size_t)size > 2 * s->srv->cfg->out_queue + CKPTD_MAX_FRAME) {
		s->drop_why = "output queue full (peer is not reading its replies)";
		return -ENOBUFS;
	}
	outbuf *o = malloc(sizeof(*o) + (size_t)size + CKPTD_SEAL_LEN);
	if (!o)
		return -ENOMEM;
	o->next = NULL;
	o->off = 0;
	o->fd = -1;
	size_t cap = (size_t)size + CKPTD_SEAL_LEN;
	int r = ckptd_msg_encode(m, o->data, cap, &o->len);
	if (r == 0 && seal)
		r = ckptd_auth_seal(s->auth, o->data, o->len, cap, &o->len);
	if (r == 0 && fd >= 0 && (o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		r = -errno;
	if (r < 0) {
		free(o);
		return r;
	}
	if (s->out_tail)
		s->out_tail->next = o;
	else
		s->out_head = o;
	s->out_tail = o;
	if (!s->out_deadline)
		s->out_deadline = ckpt__now_ns() + ms_to_ns(s->srv->cfg->frame_timeout_ms);
	s->out_bytes += o->len;
	return 0;
}

int ckptd_session_send(ckptd_session *s, const ckptd_msg *m, int fd)
{
	if (fd >= 0 && s->transport != CKPTD_TRANSPORT_UNIX)
		return -ENOTSUP;
	if (s->state != S_READY)
		return -EPIPE;
	return queue(s, m, fd, 1);
}

static int send_error(ckptd_session *s, uint32_t code, const char *text)
{
	ckptd_msg m = { .type = CKPTD_MSG_ERROR };
	m.u.error.code = code;
	if (text)
		snprintf(m.u.error.text, sizeof(m.u.error.text), "%s", text);
	m.u.error.own_version = CKPTD_PROTO_VERSION;
	return queue(s, &m, -1, s->state == S_READY);
}

int ckptd_session_send_error(ckptd_session *s, uint32_t code, const char *text)
{
	return send_error(s, code, text);
}

/* Drops a peer: one log line with the reason, a last ERROR when code is
 * set (flushed for a moment, never waited on), then close. */
static void drop(ckptd_session *s, uint32_t code, const char *why)
{
	if (s->fd < 0 || s->closing)
		return;
	ckptd_server *srv = s->srv;
	CKPTD_WARN(srv->log, s->peer, s->job, "dropped: %s", why);
	if (code)
		send_error(s, code, why);
	s->closing = 1;
	s->close_deadline = ckpt__now_ns() + CLOSE_LINGER_NS;
	if (!s->out_head) {
		session_close(s);
		return;
	}
	flush(s);
}

/* Writes what the queue holds until the socket is full. */
static int flush(ckptd_session *s)
{
	while (s->fd >= 0 && s->out_head) {
		outbuf *o = s->out_head;
		ssize_t n;
		if (o->fd >= 0 && o->off == 0) {
			union {
				char buf[CMSG_SPACE(sizeof(int))];
				struct cmsghdr align;
			} u;
			struct iovec iov = { .iov_base = o->data, .iov_len = o->len };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			                     .msg_controllen = sizeof(u.buf) };
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &o->fd, sizeof(int));
			n = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		} else {
			n = send(s->fd, o->data + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			/* The peer is gone; nothing more can be said to it. */
			if (!s->closing)
				CKPTD_INFO(s->srv->log, s->peer, s->job, "dropped: write failed: %s", strerror(errno));
			session_close(s);
			return -EPIPE;
		}
		o->off += (size_t)n;
		s->out_bytes -= (size_t)n;
		s->out_deadline = ckpt__now_ns() + ms_to_ns(s->srv->cfg->frame_timeout_ms);
		if (o->off == o->len) {
			s->out_head = o->next;
			if (!s->out_head)
				s->out_tail = NULL;
			if (o->fd >= 0)
				close(o->fd);
			free(o);
		}
	}
	if (s->fd < 0)
		return -EPIPE;
	if (!s->out_head) {
		s->out_deadline = 0;
		if (s->closing) {
			session_close(s);
			return -EPIPE;
		}
	}
	/* Frames the reader already holds raise no EPOLLIN: a pass of the loop
	 * answers them (resume_sessions). */
	if (s->throttled && s->out_bytes < s->srv->cfg->out_queue) {
		s->throttled = 0;
		s->resume = 1;
		s->srv->resume = 1;
	}
	update_watch(s);
	return 0;
}

/* ---------------------------------------------------------------- handshake */

/* Authenticated sessions, not counting except (the one authenticating now). */
static uint32_t count_ready(const ckptd_server *srv, const ckptd_session *except)
{
	uint32_t n = 0;
	for (const ckptd_session *s = srv->live; s; s = s->next)
		n += s != except && s->state == S_READY;
	return n;
}

static const char *role_name(uint32_t r)
{
	return r == CKPTD_ROLE_RANK ? "rank" : r == CKPTD_ROLE_AGENT ? "agent" : r == CKPTD_ROLE_CLI ? "cli" : "?";
}

static void on_hello(ckptd_session *s, const ckptd_msg *m)
{
	ckptd_server *srv = s->srv;
	const ckptd_hello *h = &m->u.hello;
	ckptd_secret *derived = NULL;
	const ckptd_secret *use = srv->cluster;
	uint8_t nonce[CKPTD_NONCE_LEN];
	s->role = h->role;
	snprintf(s->job, sizeof(s->job), "%s", h->job);
	if (h->job[0]) {
		if (ckptd_secret_derive_job(srv->cluster, h->job, &derived) < 0)
			goto refuse;
		use = derived;
	}
	int r = ckptd_auth_server_start(s->auth, use, CKPTD_VERSION_PACK(m->major, m->minor), h->role, h->job,
	                                h->nonce, nonce);
	ckptd_secret_free(derived);
	derived = NULL;
	if (r == -CKPT_EFORMAT) {
		ckptd_msg e;
		ckptd_msg_version_error(&e, CKPTD_VERSION_PACK(m->major, m->minor));
		queue(s, &e, -1, 0);
		drop(s, 0, "protocol major version not supported");
		return;
	}
	if (r < 0)
		goto refuse;
	ckptd_msg c = { .type = CKPTD_MSG_CHALLENGE };
	memcpy(c.u.challenge.nonce, nonce, sizeof(nonce));
	if (queue(s, &c, -1, 0) < 0) {
		drop(s, 0, "cannot queue CHALLENGE");
		return;
	}
	s->state = S_AUTH;
	return;
refuse:
	ckptd_secret_free(derived);
	drop(s, CKPTD_ERR_AUTH, "authentication failed: role and scope do not go together");
}

static void on_auth(ckptd_session *s, const ckptd_msg *m)
{
	uint8_t mac[CKPTD_MAC_LEN];
	if (ckptd_auth_server_verify(s->auth, m->u.auth.mac, mac) < 0) {
		CKPTD_DEBUG(s->srv->log, s->peer, s->job, "proof of role %s does not verify", role_name(s->role));
		drop(s, CKPTD_ERR_AUTH, "authentication failed");
		return;
	}
	if (count_ready(s->srv, s) >= s->srv->cfg->max_conns) {
		char why[96];
		snprintf(why, sizeof(why), "refused: connection limit (%u) reached", s->srv->cfg->max_conns);
		drop(s, CKPTD_ERR_BUSY, why);
		return;
	}
	ckptd_msg ok = { .type = CKPTD_MSG_AUTH_OK };
	memcpy(ok.u.auth_ok.mac, mac, sizeof(mac));
	/* AUTH_OK itself goes unsealed: the client seals only once it has
	 * checked this proof. */
	if (queue(s, &ok, -1, 0) < 0) {
		drop(s, 0, "cannot queue AUTH_OK");
		return;
	}
	s->state = S_READY;
	s->hs_deadline = 0;
	CKPTD_INFO(s->srv->log, s->peer, s->job, "authenticated as %s", role_name(s->role));
}

/* ---------------------------------------------------------------- dispatch */

static void dispatch(ckptd_session *s, const ckptd_msg *m)
{
	ckptd_server *srv = s->srv;
	switch (m->type) {
	case CKPTD_MSG_HELLO:
	case CKPTD_MSG_CHALLENGE:
	case CKPTD_MSG_AUTH:
	case CKPTD_MSG_AUTH_OK:
		drop(s, CKPTD_ERR_STATE, "handshake message after the handshake");
		return;
	case CKPTD_MSG_ERROR:
		CKPTD_INFO(srv->log, s->peer, s->job, "peer reported error %u", m->u.error.code);
		return;
	default:
		break;
	}
	/* Job scope, for every message and before any handler (the table says
	 * which carry a job): a job's session reaches its own job only. */
	if (!ckptd_msg_job_allowed(m, s->job)) {
		send_error(s, CKPTD_ERR_DENIED, "this session is not authorised for that job");
		return;
	}
	for (size_t i = 0; i < srv->nhandlers; i++) {
		if (srv->handlers[i].type != m->type)
			continue;
		s->drop_why = NULL;
		int r = srv->handlers[i].fn(srv, s, m, srv->handlers[i].arg);
		if (r < 0 && s->fd >= 0 && !s->closing) {
			CKPTD_WARN(srv->log, s->peer, s->job, "dropped: %s handler failed: %s", ckptd_msg_name(m->type),
			           s->drop_why ? s->drop_why : strerror(r < -4095 ? EPROTO : -r));
			if (r != -ENOBUFS)
				send_error(s, CKPTD_ERR_INTERNAL, "request failed; see the daemon log");
			s->closing = 1;
			s->close_deadline = ckpt__now_ns() + CLOSE_LINGER_NS;
			if (!s->out_head)
				session_close(s);
		}
		return;
	}
	send_error(s, CKPTD_ERR_UNSUPPORTED, "no handler for this message type on this daemon");
}

/* One complete frame from the reader. */
static void on_frame(ckptd_session *s, uint8_t *frame, size_t len)
{
	ckptd_msg m;
	const char *why = NULL;
	size_t olen = len;
	if (s->state == S_READY && ckptd_auth_open(s->auth, frame, len, &olen) < 0) {
		/* Not sent: the peer's seal is broken, ours would be answered the same. */
		drop(s, 0, "frame not sealed, or its seal does not verify");
		return;
	}
	int r = ckptd_msg_decode(frame, olen, &m, &why);
	if (r == -CKPT_EFORMAT) {
		ckptd_msg e;
		ckptd_msg_version_error(&e, CKPTD_VERSION_PACK(m.major, m.minor));
		queue(s, &e, -1, s->state == S_READY);
		drop(s, 0, "protocol major version not supported");
		return;
	}
	if (r == -EOPNOTSUPP && s->state == S_READY) {
		send_error(s, CKPTD_ERR_UNSUPPORTED, "message type unknown to this daemon");
		return;
	}
	if (r == -EMSGSIZE) {
		drop(s, CKPTD_ERR_TOO_BIG, "message over the size limit");
		return;
	}
	if (r < 0) {
		char w[160];
		snprintf(w, sizeof(w), "malformed frame: %s", why ? why : "undecodable");
		drop(s, CKPTD_ERR_MALFORMED, w);
		return;
	}
	s->last_rx = ckpt__now_ns();
	if (s->state == S_HELLO) {
		if (m.type == CKPTD_MSG_HELLO)
			on_hello(s, &m);
		else
			drop(s, CKPTD_ERR_AUTH, "message before the handshake");
	} else if (s->state == S_AUTH) {
		if (m.type == CKPTD_MSG_AUTH)
			on_auth(s, &m);
		else
			drop(s, CKPTD_ERR_AUTH, "expected AUTH");
	} else {
		dispatch(s, &m);
	}
	ckptd_msg_free(&m);
}

static const char *reader_reason(int r)
{
	switch (r) {
	case -EMSGSIZE: return "frame over the size limit";
	case -CKPT_ECORRUPT: return "bad frame magic (not the ckptd protocol)";
	case -ETIMEDOUT: return "frame not complete within the frame timeout (slow client)";
	default: return "frame reader failed";
	}
}

static uint32_t reader_code(int r)
{
	return r == -EMSGSIZE ? CKPTD_ERR_TOO_BIG : r == -ETIMEDOUT ? CKPTD_ERR_TIMEOUT : CKPTD_ERR_MALFORMED;
}

/* Answers the complete frames the reader holds, until the peer's unread
 * replies reach --out-queue (backpressure: the rest wait in the reader,
 * and flush resumes them once the replies drain). Returns 0, or the
 * reader's error. */
static int answer_frames(ckptd_session *s, uint64_t t)
{
	while (s->fd >= 0 && !s->closing) {
		if (s->out_bytes >= s->srv->cfg->out_queue) {
			s->throttled = 1;
			return 0;
		}
		uint8_t *frame;
		size_t len;
		int r = ckptd_reader_next(s->reader, t, &frame, &len);
		if (r != 1)
			return r;
		on_frame(s, frame, len);
	}
	return 0;
}

/* The sessions whose replies drained while frames waited in their reader:
 * answer those frames (then read the socket again as usual). */
static void resume_sessions(ckptd_server *srv)
{
	if (!srv->resume)
		return;
	srv->resume = 0;
	uint64_t t = ckpt__now_ns();
	for (ckptd_session *s = srv->live, *n; s; s = n) {
		n = s->next;
		if (!s->resume)
			continue;
		s->resume = 0;
		int r = answer_frames(s, t);
		if (r < 0 && s->fd >= 0)
			drop(s, reader_code(r), reader_reason(r));
		if (s->fd >= 0)
			flush(s);
	}
}

static void on_readable(ckptd_session *s)
{
	for (int i = 0; i < READS_PER_EVENT && s->fd >= 0 && !s->closing; i++) {
		uint8_t *p;
		size_t cap;
		int r = ckptd_reader_space(s->reader, &p, &cap);
		if (r < 0) {
			drop(s, reader_code(r), reader_reason(r));
			break;
		}
		ssize_t n = recv(s->fd, p, cap, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			if (n == 0 && ckptd_reader_buffered(s->reader) > 0)
				CKPTD_WARN(s->srv->log, s->peer, s->job, "dropped: closed in the middle of a frame (truncated)");
			else if (n == 0 && !s->rx_any)
				CKPTD_DEBUG(s->srv->log, s->peer, s->job, "closed before sending anything");
			else if (n == 0 && s->state != S_READY)
				CKPTD_WARN(s->srv->log, s->peer, s->job, "dropped: closed during the handshake");
			else if (n == 0)
				CKPTD_DEBUG(s->srv->log, s->peer, s->job, "closed by peer");
			else
				CKPTD_INFO(s->srv->log, s->peer, s->job, "dropped: read failed: %s", strerror(errno));
			session_close(s);
			return;
		}
		uint64_t t = ckpt__now_ns();
		s->rx_any = 1;
		r = ckptd_reader_commit(s->reader, (size_t)n, t);
		if (r == 0)
			r = answer_frames(s, t);
		if (r < 0 && s->fd >= 0) {
			drop(s, reader_code(r), reader_reason(r));
			break;
		}
		if (s->out_bytes >= s->srv->cfg->out_queue)
			break;
	}
	if (s->fd >= 0)
		flush(s);
}

/* ---------------------------------------------------------------- timers */

static uint64_t session_deadline(const ckptd_session *s)
{
	uint64_t d = UINT64_MAX;
	const ckptd_config *cfg = s->srv->cfg;
	if (s->closing)
		return s->close_deadline;
	uint64_t rd = ckptd_reader_deadline(s->reader);
	if (rd < d)
		d = rd;
	if (s->hs_deadline && s->hs_deadline < d)
		d = s->hs_deadline;
	if (s->state == S_READY && cfg->idle_timeout_ms && s->last_rx + ms_to_ns(cfg->idle_timeout_ms) < d)
		d = s->last_rx + ms_to_ns(cfg->idle_timeout_ms);
	if (s->out_deadline && s->out_deadline < d)
		d = s->out_deadline;
	return d;
}

static void check_deadlines(ckptd_server *srv, uint64_t t)
{
	for (ckptd_session *s = srv->live, *n; s; s = n) {
		n = s->next;
		if (session_deadline(s) > t)
			continue;
		if (s->closing) {
			session_close(s);
		} else if (s->out_deadline && s->out_deadline <= t) {
			CKPTD_WARN(srv->log, s->peer, s->job, "dropped: peer has not read its replies within the frame timeout");
			session_close(s);
		} else if (ckptd_reader_deadline(s->reader) <= t) {
			drop(s, CKPTD_ERR_TIMEOUT, reader_reason(-ETIMEDOUT));
		} else if (s->hs_deadline && s->hs_deadline <= t) {
			drop(s, CKPTD_ERR_TIMEOUT, "handshake not complete within the handshake timeout");
		} else {
			drop(s, CKPTD_ERR_TIMEOUT, "idle for longer than the idle timeout");
		}
	}
}

static int next_timeout_ms(ckptd_server *srv, uint64_t t, uint64_t extra)
{
	uint64_t d = extra;
	for (size_t i = 0; i < srv->ntimers; i++)
		if (srv->timers[i].due_ns < d)
			d = srv->timers[i].due_ns;
	for (ckptd_session *s = srv->live; s; s = s->next) {
		uint64_t sd = session_deadline(s);
		if (sd < d)
			d = sd;
	}
	if (d == UINT64_MAX)
		return -1;
	if (d <= t)
		return 0;
	uint64_t ms = (d - t + 999999) / 1000000;
	return ms > 60000 ? 60000 : (int)ms;
}

/* ---------------------------------------------------------------- accept */

static void peer_name(ckptd_session *s, const struct sockaddr_storage *ss)
{
	if (s->transport == CKPTD_TRANSPORT_UNIX) {
		struct ucred cr;
		socklen_t sl = sizeof(cr);
		if (getsockopt(s->fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) == 0) {
			s->have_cred = 1;
			s->pid = cr.pid;
			s->uid = cr.uid;
			s->gid = cr.gid;
			snprintf(s->peer, sizeof(s->peer), "unix:pid=%d,uid=%u", (int)cr.pid, (unsigned)cr.uid);
			snprintf(s->peer_key, sizeof(s->peer_key), "uid=%u", (unsigned)cr.uid);
		} else {
			snprintf(s->peer, sizeof(s->peer), "unix:?");
		}
		return;
	}
	char h[INET6_ADDRSTRLEN + 1], p[8];
	if (getnameinfo((const struct sockaddr *)ss, sizeof(*ss), h, sizeof(h), p, sizeof(p),
	                NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
		snprintf(s->peer, sizeof(s->peer), ss->ss_family == AF_INET6 ? "tcp:[%s]:%s" : "tcp:%s:%s", h, p);
		snprintf(s->peer_key, sizeof(s->peer_key), "%s", h);
	} else
		snprintf(s->peer, sizeof(s->peer), "tcp:?");
}

/* Handshake slots are bounded apart from --max-conns, per peer and in
 * total. When they are full the oldest handshake gives way rather than the
 * new one: idle connections then hold a slot for as long as it takes others
 * to arrive, not until the handshake timeout, and a client that completes
 * its handshake promptly always gets through. */
static void make_handshake_room(ckptd_server *srv, const ckptd_session *n)
{
	ckptd_session *oldest = NULL, *oldest_peer = NULL;
	uint32_t total = 0, same = 0;
	for (ckptd_session *s = srv->live; s; s = s->next) {
		if (s->state == S_READY || s->closing || s->fd < 0)
			continue;
		total++;
		if (!oldest || s->hs_deadline < oldest->hs_deadline)
			oldest = s;
		if (!strcmp(s->peer_key, n->peer_key)) {
			same++;
			if (!oldest_peer || s->hs_deadline < oldest_peer->hs_deadline)
				oldest_peer = s;
		}
	}
	char why[128];
	/* Per peer over TCP only: a node's ranks share one uid on the Unix
	 * socket and may all connect at once when a job starts. */
	if (n->transport == CKPTD_TRANSPORT_TCP && oldest_peer && same >= srv->cfg->max_handshakes_per_peer) {
		snprintf(why, sizeof(why), "handshake limit per peer (%u) reached; the oldest gives way to a new connection",
		         srv->cfg->max_handshakes_per_peer);
		drop(oldest_peer, CKPTD_ERR_BUSY, why);
	} else if (oldest && total >= srv->cfg->max_handshakes) {
		snprintf(why, sizeof(why), "handshake limit (%u) reached; the oldest gives way to a new connection",
		         srv->cfg->max_handshakes);
		drop(oldest, CKPTD_ERR_BUSY, why);
	}
}

static void on_accept(ckptd_server *srv, int lfd, int transport)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				CKPTD_ERROR(srv->log, NULL, NULL, "accept: %s", strerror(errno));
			return;
		}
		ckptd_session *s = calloc(1, sizeof(*s));
		ckptd_reader_opts ro = { .size = sizeof(ro), .frame_timeout_ns = ms_to_ns(srv->cfg->frame_timeout_ms) };
		if (!s || ckptd_reader_new(&ro, &s->reader) < 0 || ckptd_auth_new(&s->auth) < 0) {
			CKPTD_ERROR(srv->log, NULL, NULL, "out of memory for a connection");
			if (s)
				session_free(s);
			close(fd);
			continue;
		}
		s->srv = srv;
		s->fd = fd;
		s->transport = transport;
		s->state = S_HELLO;
		peer_name(s, &ss);
		uint64_t t = ckpt__now_ns();
		s->hs_deadline = t + ms_to_ns(srv->cfg->handshake_timeout_ms);
		s->last_rx = t;
		if (count_ready(srv, NULL) >= srv->cfg->max_conns) {
			/* Said in one unsealed ERROR, best effort, then closed. */
			uint8_t buf[256];
			size_t len;
			ckptd_msg m = { .type = CKPTD_MSG_ERROR };
			m.u.error.code = CKPTD_ERR_BUSY;
			snprintf(m.u.error.text, sizeof(m.u.error.text), "connection limit reached; try again later");
			if (ckptd_msg_encode(&m, buf, sizeof(buf), &len) == 0)
				(void)!send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
			CKPTD_WARN(srv->log, s->peer, NULL, "refused: connection limit (%u) reached", srv->cfg->max_conns);
			close(fd);
			s->fd = -1;
			session_free(s);
			continue;
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			CKPTD_ERROR(srv->log, s->peer, NULL, "epoll_ctl: %s", strerror(errno));
			close(fd);
			s->fd = -1;
			session_free(s);
			continue;
		}
		make_handshake_room(srv, s);
		s->events = EPOLLIN;
		s->next = srv->live;
		if (srv->live)
			srv->live->prev = s;
		srv->live = s;
		srv->nlive++;
		CKPTD_DEBUG(srv->log, s->peer, NULL, "connected (%u open)", srv->nlive);
	}
}

/* ---------------------------------------------------------------- STATUS */

static int on_status(ckptd_server *srv, ckptd_session *s, const ckptd_msg *req, void *arg)
{
	(void)req; /* its job, the only field, was checked in dispatch */
	(void)arg;
	ckptd_msg m = { .type = CKPTD_MSG_STATUS_REPLY };
	snprintf(m.u.status_reply.node, sizeof(m.u.status_reply.node), "%s", srv->node);
	m.u.status_reply.roles = srv->cfg->roles;
	if (srv->cfg->roles & CKPTD_SERVES_AGENT)
		m.u.status_reply.pool_bytes = srv->cfg->pool_size;
	/* The reply has no fields for these yet (docs/protocol.md): the log has them. */
	CKPTD_DEBUG(srv->log, s->peer, s->job, "status: up %llus, %u connections",
	            (unsigned long long)((ckpt__now_ns() - srv->started_ns) / 1000000000ull), srv->nlive);
	return ckptd_session_send(s, &m, -1);
}

/* ---------------------------------------------------------------- API */

int ckptd_server_new(const ckptd_config *cfg, const ckptd_secret *cluster, const ckptd_log *log,
                     ckptd_server **out, char *err, size_t errcap)
{
	int r;
	*out = NULL;
	if (err && errcap)
		err[0] = 0;
	if (!cfg->listen && !cfg->socket) {
		ckptd__errf(err, errcap, "nothing to listen on: set --listen HOST:PORT and/or --socket PATH");
		return -EINVAL;
	}
	if (!cluster) {
		ckptd__errf(err, errcap, "no secret: set --token-file FILE or CKPT_TOKEN");
		return -ENOKEY;
	}
	if (sodium_init() < 0) {
		ckptd__errf(err, errcap, "libsodium failed to initialise");
		return -EIO;
	}
	ckptd_server *srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = cfg;
	srv->log = log;
	srv->epfd = srv->sigfd = srv->tcp_fd = srv->unix_fd = -1;
	for (size_t i = 0; i < MAX_WATCHES; i++)
		srv->watches[i].fd = -1;
	srv->started_ns = ckpt__now_ns();
	if (cfg->node)
		snprintf(srv->node, sizeof(srv->node), "%s", cfg->node);
	else if (gethostname(srv->node, sizeof(srv->node) - 1) < 0 || ckpt__job_valid(srv->node) < 0)
		snprintf(srv->node, sizeof(srv->node), "localhost");
	srv->cluster = cluster;

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, &srv->oldmask) < 0) {
		r = -errno;
		goto fail;
	}
	srv->mask_set = 1;
	signal(SIGPIPE, SIG_IGN);
	if ((srv->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
	    (srv->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		r = -errno;
		goto fail;
	}
	if (cfg->listen && (r = ckptd__listen_tcp(srv, cfg->listen, err, errcap)) < 0)
		goto fail;
	if (cfg->socket && (r = ckptd__listen_unix(srv, cfg->socket, err, errcap)) < 0)
		goto fail;
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.ptr = &srv->sigfd;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->sigfd, &ev) < 0)
		goto fail_errno;
	if (srv->tcp_fd >= 0) {
		ev.data.ptr = &srv->tcp_fd;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->tcp_fd, &ev) < 0)
			goto fail_errno;
	}
	if (srv->unix_fd >= 0) {
		ev.data.ptr = &srv->unix_fd;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->unix_fd, &ev) < 0)
			goto fail_errno;
	}
	/* After the signal mask: libmicrohttpd's thread inherits it. */
	char ver[32];
	snprintf(ver, sizeof(ver), "%d.%d.%d", CKPT_VERSION_MAJOR, CKPT_VERSION_MINOR, CKPT_VERSION_PATCH);
	if ((r = ckptd_metrics_new(log, srv->node, ver, &srv->metrics)) < 0)
		goto fail;
	if (cfg->metrics_listen && (r = ckptd_metrics_serve(srv->metrics, cfg->metrics_listen, err, errcap)) < 0)
		goto fail;
	ckptd_server_on(srv, CKPTD_MSG_STATUS, on_status, NULL);
	*out = srv;
	return 0;
fail_errno:
	r = -errno;
fail:
	if (err && errcap && !err[0])
		ckptd__errf(err, errcap, "cannot start: %s", strerror(r < -4095 ? EINVAL : -r));
	ckptd_server_free(srv);
	return r;
}

void ckptd_server_free(ckptd_server *srv)
{
	if (!srv)
		return;
	srv->stopping = 1;
	while (srv->live)
		session_close(srv->live);
	reap(srv);
	ckptd_metrics_free(srv->metrics);
	ckptd__close_listeners(srv);
	if (srv->sigfd >= 0)
		close(srv->sigfd);
	if (srv->epfd >= 0)
		close(srv->epfd);
	if (srv->mask_set)
		sigprocmask(SIG_SETMASK, &srv->oldmask, NULL);
	free(srv);
}

int ckptd_server_on(ckptd_server *srv, uint16_t type, ckptd_handler_fn handler, void *arg)
{
	if (type == CKPTD_MSG_HELLO || type == CKPTD_MSG_CHALLENGE || type == CKPTD_MSG_AUTH ||
	    type == CKPTD_MSG_AUTH_OK || type == CKPTD_MSG_ERROR)
		return -EINVAL;
	for (size_t i = 0; i < srv->nhandlers; i++) {
		if (srv->handlers[i].type != type)
			continue;
		if (handler) {
			srv->handlers[i].fn = handler;
			srv->handlers[i].arg = arg;
		} else {
			srv->handlers[i] = srv->handlers[--srv->nhandlers];
		}
		return 0;
	}
	if (!handler)
		return 0;
	if (srv->nhandlers == MAX_HANDLERS)
		return -ENOSPC;
	srv->handlers[srv->nhandlers].type = type;
	srv->handlers[srv->nhandlers].fn = handler;
	srv->handlers[srv->nhandlers].arg = arg;
	srv->nhandlers++;
	return 0;
}

void ckptd_server_stop(ckptd_server *srv)
{
	srv->stop = 1;
}

ckptd_metrics *ckptd_server_metrics(const ckptd_server *srv)
{
	return srv->metrics;
}

int ckptd_server_tcp_port(const ckptd_server *srv)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (srv->tcp_fd < 0 || getsockname(srv->tcp_fd, (struct sockaddr *)&ss, &sl) < 0)
		return 0;
	return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                      : ((struct sockaddr_in *)&ss)->sin_port);
}

uint32_t ckptd_server_connections(const ckptd_server *srv) { return srv->nlive; }
const ckptd_config *ckptd_server_config(const ckptd_server *srv) { return srv->cfg; }
const ckptd_log *ckptd_server_log(const ckptd_server *srv) { return srv->log; }
const char *ckptd_server_node(const ckptd_server *srv) { return srv->node; }

const char *ckptd_session_job(const ckptd_session *s) { return s->job; }
uint32_t ckptd_session_role(const ckptd_session *s) { return s->role; }
int ckptd_session_transport(const ckptd_session *s) { return s->transport; }
const char *ckptd_session_peer(const ckptd_session *s) { return s->peer; }
uint32_t ckptd_session_version(const ckptd_session *s) { return ckptd_auth_version(s->auth); }
void *ckptd_session_data(const ckptd_session *s) { return s->data; }
void ckptd_session_drop_reason(ckptd_session *s, const char *why) { s->drop_why = why; }
void ckptd_session_drop(ckptd_session *s, const char *why) { drop(s, CKPTD_ERR_TIMEOUT, why); }

void ckptd_session_set_data(ckptd_session *s, void *data, void (*destroy)(void *))
{
	s->data = data;
	s->destroy = destroy;
}

int ckptd_session_peer_cred(const ckptd_session *s, pid_t *pid, uid_t *uid, gid_t *gid)
{
	if (!s->have_cred)
		return -ENOENT;
	if (pid)
		*pid = s->pid;
	if (uid)
		*uid = s->uid;
	if (gid)
		*gid = s->gid;
	return 0;
}

/* ---------------------------------------------------------------- role hooks */

int ckptd_server_watch(ckptd_server *srv, int fd, ckptd_watch_fn fn, void *arg)
{
	for (size_t i = 0; i < MAX_WATCHES; i++) {
		struct watch *w = &srv->watches[i];
		if (w->fd >= 0)
			continue;
		struct epoll_event ev = { .events = EPOLLIN };
		ev.data.ptr = w;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			return -errno;
		w->fd = fd;
		w->fn = fn;
		w->arg = arg;
		return 0;
	}
	return -ENOSPC;
}

void ckptd_server_unwatch(ckptd_server *srv, int fd)
{
	for (size_t i = 0; i < MAX_WATCHES; i++) {
		if (srv->watches[i].fd != fd || fd < 0)
			continue;
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, fd, NULL);
		srv->watches[i].fd = -1;
	}
}

int ckptd_server_every(ckptd_server *srv, uint64_t period_ms, ckptd_hook_fn fn, void *arg)
{
	if (!period_ms || !fn)
		return -EINVAL;
	if (srv->ntimers == MAX_TIMERS)
		return -ENOSPC;
	srv->timers[srv->ntimers].period_ns = ms_to_ns(period_ms);
	srv->timers[srv->ntimers].due_ns = ckpt__now_ns() + ms_to_ns(period_ms);
	srv->timers[srv->ntimers].fn = fn;
	srv->timers[srv->ntimers].arg = arg;
	srv->ntimers++;
	return 0;
}

int ckptd_server_after_events(ckptd_server *srv, ckptd_hook_fn fn, void *arg)
{
	if (!fn)
		return -EINVAL;
	if (srv->nafter == MAX_AFTER)
		return -ENOSPC;
	srv->after[srv->nafter].fn = fn;
	srv->after[srv->nafter].arg = arg;
	srv->nafter++;
	return 0;
}

/* After a batch of events: the roles' hooks, then whatever they queued goes
 * out (handlers' replies are flushed by on_readable; hooks' are not). */
static void run_hooks(ckptd_server *srv)
{
	for (size_t i = 0; i < srv->nafter; i++)
		srv->after[i].fn(srv, srv->after[i].arg);
	uint64_t t = ckpt__now_ns();
	for (size_t i = 0; i < srv->ntimers; i++) {
		if (srv->timers[i].due_ns > t)
			continue;
		srv->timers[i].due_ns = t + srv->timers[i].period_ns;
		srv->timers[i].fn(srv, srv->timers[i].arg);
	}
	if (!srv->nafter && !srv->ntimers)
		return;
	for (ckptd_session *s = srv->live, *n; s; s = n) {
		n = s->next;
		if (s->fd >= 0 && s->out_head)
			flush(s);
	}
}

/* ---------------------------------------------------------------- loop */

int ckptd_server_stopping(const ckptd_server *srv)
{
	return srv->stopping;
}

static void begin_stop(ckptd_server *srv, const char *why)
{
	srv->stopping = 1;
	CKPTD_INFO(srv->log, NULL, NULL, "stopping (%s): no new connections, flushing %u", why, srv->nlive);
	ckptd__close_listeners(srv);
	/* Requests already read have been answered; what remains is to let
	 * the answers reach their peers. */
	uint64_t t = ckpt__now_ns();
	for (ckptd_session *s = srv->live, *n; s; s = n) {
		n = s->next;
		s->closing = 1;
		s->close_deadline = t + ms_to_ns(srv->cfg->shutdown_grace_ms);
		if (!s->out_head)
			session_close(s);
		else
			update_watch(s);
	}
}

int ckptd_server_run(ckptd_server *srv)
{
	struct epoll_event evs[64];
	int stopping = 0;
	CKPTD_INFO(srv->log, NULL, NULL, "serving as %s%s%s on %s%s%s%s (node %s)",
	           srv->cfg->roles & CKPTD_SERVES_AGENT ? "agent" : "",
	           srv->cfg->roles == (CKPTD_SERVES_AGENT | CKPTD_SERVES_COORDINATOR) ? "+" : "",
	           srv->cfg->roles & CKPTD_SERVES_COORDINATOR ? "coordinator" : "",
	           srv->cfg->listen ? srv->cfg->listen : "", srv->cfg->listen && srv->cfg->socket ? " and " : "",
	           srv->cfg->socket ? "unix:" : "", srv->cfg->socket ? srv->cfg->socket : "", srv->node);
	for (;;) {
		if (srv->stop && !stopping) {
			stopping = 1;
			begin_stop(srv, "requested");
		}
		if (stopping && !srv->live)
			break;
		int timeout = srv->resume ? 0 : next_timeout_ms(srv, ckpt__now_ns(), UINT64_MAX);
		int n = epoll_wait(srv->epfd, evs, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &srv->sigfd) {
				struct signalfd_siginfo si;
				while (read(srv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					if (stopping) {
						CKPTD_WARN(srv->log, NULL, NULL, "second signal: closing %u connections now", srv->nlive);
						while (srv->live)
							session_close(srv->live);
					} else {
						stopping = 1;
						begin_stop(srv, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
					}
				}
			} else if (p == &srv->tcp_fd) {
				if (srv->tcp_fd >= 0)
					on_accept(srv, srv->tcp_fd, CKPTD_TRANSPORT_TCP);
			} else if (p == &srv->unix_fd) {
				if (srv->unix_fd >= 0)
					on_accept(srv, srv->unix_fd, CKPTD_TRANSPORT_UNIX);
			} else if ((char *)p >= (char *)srv->watches && (char *)p < (char *)(srv->watches + MAX_WATCHES)) {
				struct watch *w = p;
				if (w->fd >= 0)
					w->fn(srv, w->fd, evs[i].events, w->arg);
			} else {
				ckptd_session *s = p;
				if (s->fd < 0)
					continue;
				if (evs[i].events & EPOLLOUT)
					flush(s);
				if (s->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !s->closing)
					on_readable(s);
				else if (s->fd >= 0 && s->closing && (evs[i].events & (EPOLLHUP | EPOLLERR)))
					session_close(s);
			}
		}
		run_hooks(srv);
		resume_sessions(srv);
		check_deadlines(srv, ckpt__now_ns());
		reap(srv);
	}
	reap(srv);
	CKPTD_INFO(srv->log, NULL, NULL, "stopped");
	return 0;
}
