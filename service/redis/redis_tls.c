/* redis_tls.c -- TLS to Redis through tunnels, for the blocking
 * connections (the subscriber, the sentinel resolver, start-up checks):
 * hiredis 0.14 (Debian 12's) has no TLS, and a blocking context reads and
 * writes its descriptor itself (redisCommand, redisGetReply), so dlockd
 * gives it one end of a socketpair and runs the TLS session on the
 * other, in a pump thread it owns. (The loops' pipelined connections
 * drive their contexts by hand and run TLS on their own sockets instead:
 * redis_tls_io.c.)
 *
 *   hiredis ──fd── socketpair ──plain end── pump ──GnuTLS── TCP ── Redis
 *
 * redis_tls_open() makes the pair, runs the TCP connect and the handshake
 * itself, within the caller's timeout, so a failure is known before
 * hiredis sends anything, and hands the tunnel to the pump. The pump
 * (one thread, one epoll for every tunnel) then copies bytes both ways: from the plain end into
 * gnutls_record_send, from gnutls_record_recv to the plain end, one
 * record-sized buffer each way, so a slow side holds the other back
 * rather than growing memory.
 *
 * The session is set up, verified and judged by redis_tls_session.c,
 * as the loops' own sessions are (redis_tls_io.c): the server's
 * certificate is checked inside the handshake, so a certificate refused
 * ends the handshake with an alert and nothing was sent.
 *
 * A tunnel that fails -- no TCP connection, a handshake refused or timed
 * out, a certificate not trusted, an alert later -- is logged with
 * host:port and the reason (redis_tls_report_failure: once at error
 * level), and its plain end closed: hiredis reads the connection as
 * closed, which its users already treat as Redis unavailable (503 with
 * Retry-After, a reconnect with backoff).
 *
 * Threads: redis_tls_open() runs in the caller's thread and hands the
 * tunnel to the pump through a mutex-guarded list and an eventfd; from
 * then on only the pump touches it. */
#include "service/redis/redis_tls.h"

#include "service/base/log.h"
#include "service/redis/redis_tls_session.h"
#include "service/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* One TLS record's worth of plaintext each way. */
#define BUF_SIZE (16 * 1024)
/* As hiredis' redisEnableKeepAlive does for its own TCP connections. */
#define KEEPALIVE_S 15
#define WHY_MAX REDIS_TLS_WHY_MAX

enum tunnel_state {
	T_CONNECTING,	/* the TCP connect is in progress */
	T_HANDSHAKE,	/* the TLS handshake is */
	T_OPEN,		/* bytes are copied both ways */
	T_DEAD,		/* closed; freed by the pump after this turn */
};

struct tunnel;

/* A descriptor of a tunnel as the pump's epoll has it. */
struct end {
	struct tunnel *t;
	int fd;			/* -1: none */
	bool added;		/* registered with the pump's epoll */
	uint32_t watching;	/* the events registered */
};

struct tunnel {
	struct end plain;	/* our end of the socketpair */
	struct end tcp;		/* the connection to Redis */
	enum tunnel_state state;
	struct redis_tls_session ts;	/* the session, its host and port */
	struct addrinfo *ai;	/* host's addresses; ai_next: the next to try */
	struct addrinfo *ai_next;
	int timeout_ms;
	int64_t deadline_ms;	/* monotonic: connected and verified by then */
	bool send_blocked;	/* gnutls_record_send wants the TCP socket writable */
	size_t up_off, up_len;	/* up: from hiredis, to encrypt */
	size_t down_off, down_len; /* down: decrypted, for hiredis */
	unsigned char up[BUF_SIZE];
	unsigned char down[BUF_SIZE];
	struct tunnel *next;	/* in the pump's list, or the incoming one */
};

static struct {
	int epfd, wake;			/* the pump's epoll; an eventfd to wake it */
	pthread_t thread;
	bool started;
	atomic_bool stop;
	pthread_mutex_t lock;		/* guards incoming */
	struct tunnel *incoming;	/* handed to the pump, not yet taken */
	struct tunnel *tunnels;		/* the pump's own */
} P = { .epfd = -1, .wake = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

/* ----- One tunnel: connect and handshake ----- */

/* Start a non-blocking connect to the next address of t; -1 with why
 * when none is left. */
static int tcp_next(struct tunnel *t, char *why, size_t len)
{
	while (t->ai_next) {
		struct addrinfo *a = t->ai_next;
		int fd;

		t->ai_next = a->ai_next;
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0) {
			snprintf(why, len, "cannot make a socket: %s", strerror(errno));
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
			t->tcp.fd = fd;
			t->tcp.added = false;
			t->tcp.watching = 0;
			return 0;
		}
		snprintf(why, len, "cannot connect: %s", strerror(errno));
		close(fd);
	}
	return -1;
}

static void tcp_close(struct tunnel *t)
{
	if (t->tcp.fd >= 0)
		close(t->tcp.fd);	/* leaves the epoll with it */
	t->tcp.fd = -1;
	t->tcp.added = false;
}

/* Advance the connect and the handshake: 1 once verified and open, 0 to
 * wait for *events (POLLIN or POLLOUT) on t->tcp.fd, -1 with why. */
static int tunnel_setup(struct tunnel *t, short *events, char *why, size_t len)
{
	struct pollfd p = { .fd = t->tcp.fd, .events = POLLOUT };
	int err = 0, one = 1, idle = KEEPALIVE_S, rc;
	bool write = false;
	socklen_t elen = sizeof(err);

	while (t->state == T_CONNECTING) {
		if (poll(&p, 1, 0) == 0) {
			*events = POLLOUT;	/* still connecting */
			return 0;
		}
		if (getsockopt(t->tcp.fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
			err = errno;
		if (!err) {
			setsockopt(t->tcp.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			setsockopt(t->tcp.fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
			setsockopt(t->tcp.fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
			gnutls_transport_set_int(t->ts.s, t->tcp.fd);
			t->state = T_HANDSHAKE;
			break;
		}
		snprintf(why, len, "cannot connect: %s", strerror(err));
		tcp_close(t);
		if (tcp_next(t, why, len) < 0)
			return -1;
		p.fd = t->tcp.fd;
	}
	rc = redis_tls_session_handshake(&t->ts, &write, why, len);
	if (rc > 0)
		t->state = T_OPEN;
	else if (rc == 0)
		*events = write ? POLLOUT : POLLIN;
	return rc;
}

static void tunnel_free(struct tunnel *t)
{
	if (t->plain.fd >= 0)
		close(t->plain.fd);
	tcp_close(t);
	redis_tls_session_deinit(&t->ts);
	if (t->ai)
		freeaddrinfo(t->ai);
	free(t);
}

/* A tunnel to host:port with its socketpair, session and first connect
 * started; *peer is the plain end for hiredis. NULL with why. */
static struct tunnel *tunnel_new(const char *host, int port, int timeout_ms, int *peer,
				 char *why, size_t len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct tunnel *t = xcalloc(1, sizeof(*t));
	char service[16];
	int pair[2], rc;

	t->plain = (struct end){ .t = t, .fd = -1 };
	t->tcp = (struct end){ .t = t, .fd = -1 };
	if (redis_tls_session_init(&t->ts, host, port, why, len) < 0)
		goto fail;
	t->timeout_ms = timeout_ms;
	t->deadline_ms = now_ms() + timeout_ms;
	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(host, service, &hints, &t->ai);
	if (rc) {
		t->ai = NULL;
		snprintf(why, len, "cannot resolve the host: %s", gai_strerror(rc));
		goto fail;
	}
	t->ai_next = t->ai;
	if (tcp_next(t, why, len) < 0)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
		snprintf(why, len, "cannot make a socketpair: %s", strerror(errno));
		goto fail;
	}
	t->plain.fd = pair[0];
	fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK);
	*peer = pair[1];
	return t;
fail:
	tunnel_free(t);
	return NULL;
}

/* ----- The pump ----- */

/* Set the events the pump's epoll reports for e (0: only hang-ups,
 * errors), registering e with it the first time. */
static void end_epoll_set(struct end *e, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = e };

	if (e->fd < 0 || (e->added && e->watching == events))
		return;
	if (epoll_ctl(P.epfd, e->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, e->fd, &ev) == 0) {
		e->added = true;
		e->watching = events;
	}
}

/* Close t; the pump frees it after this turn (its other end may be in
 * the same batch of events). */
static void tunnel_kill(struct tunnel *t)
{
	if (t->state == T_DEAD)
		return;
	if (t->state == T_OPEN)
		gnutls_bye(t->ts.s, GNUTLS_SHUT_WR);	/* close_notify, if it goes at once */
	t->state = T_DEAD;
	/* what hiredis wrote and nobody will send is read first: a unix
	 * socket closed with unread bytes resets its peer, and hiredis should
	 * read the connection as closed, not reset */
	while (recv(t->plain.fd, t->up, sizeof(t->up), MSG_DONTWAIT) > 0)
		;
	close(t->plain.fd);
	t->plain.fd = -1;
	tcp_close(t);
}

/* Copy what can be copied, both ways; -1 when t is over (why says why,
 * "" for an orderly end: either side closed). */
static int shuttle(struct tunnel *t, char *why, size_t len)
{
	bool progress;
	ssize_t n;

	why[0] = '\0';
	do {
		progress = false;
		if (!t->up_len) {
			n = recv(t->plain.fd, t->up, sizeof(t->up), 0);
			if (n == 0)
				return -1;	/* hiredis closed its end */
			if (n > 0) {
				t->up_off = 0;
				t->up_len = (size_t)n;
				progress = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
		if (t->up_len) {
			/* after E_AGAIN, called again with the same data, as GnuTLS asks */
			n = gnutls_record_send(t->ts.s, t->up + t->up_off, t->up_len - t->up_off);
			t->send_blocked = n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED;
			if (n > 0) {
				t->up_off += (size_t)n;
				if (t->up_off == t->up_len)
					t->up_len = 0;
				progress = true;
			} else if (!t->send_blocked) {
				redis_tls_session_describe(&t->ts, (int)n, why, len);
				return -1;
			}
		}
		if (!t->down_len) {
			n = gnutls_record_recv(t->ts.s, t->down, sizeof(t->down));
			if (n > 0) {
				t->down_off = 0;
				t->down_len = (size_t)n;
				progress = true;
				redis_tls_session_answered(&t->ts);
			} else if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
				redis_tls_session_closed(&t->ts, why, len);
				return -1;
			} else if (n != GNUTLS_E_AGAIN && n != GNUTLS_E_INTERRUPTED &&
				   n != GNUTLS_E_REHANDSHAKE) {
				redis_tls_session_describe(&t->ts, (int)n, why, len);
				return -1;
			}
		}
		if (t->down_len) {
			n = send(t->plain.fd, t->down + t->down_off, t->down_len - t->down_off,
				 MSG_NOSIGNAL);
			if (n > 0) {
				t->down_off += (size_t)n;
				if (t->down_off == t->down_len)
					t->down_len = 0;
				progress = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				return -1;	/* hiredis closed its end */
			}
		}
	} while (progress);
	return 0;
}

/* Whatever happened on t's descriptors: move it on, watch what it waits for. */
static void tunnel_run(struct tunnel *t)
{
	char why[WHY_MAX];

	if (t->state == T_DEAD)
		return;
	if (shuttle(t, why, sizeof(why)) < 0) {
		if (why[0])
			redis_tls_report_failure(t->ts.host, t->ts.port, why);
		tunnel_kill(t);
		return;
	}
	end_epoll_set(&t->plain, (t->up_len ? 0 : EPOLLIN) | (t->down_len ? EPOLLOUT : 0));
	end_epoll_set(&t->tcp, (t->down_len ? 0 : EPOLLIN) | (t->send_blocked ? EPOLLOUT : 0));
}

/* Take the tunnels handed over since the last look, and run each once. */
static void take_incoming(void)
{
	struct tunnel *in, *t;
	uint64_t v;

	if (read(P.wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("redis tls: reading the pump's eventfd: %s", strerror(errno));
	pthread_mutex_lock(&P.lock);
	in = P.incoming;
	P.incoming = NULL;
	pthread_mutex_unlock(&P.lock);
	while ((t = in)) {
		in = t->next;
		t->next = P.tunnels;
		P.tunnels = t;
		tunnel_run(t);
	}
}

/* Free the dead tunnels. */
static void sweep(void)
{
	struct tunnel **pp = &P.tunnels, *t;

	while ((t = *pp)) {
		if (t->state == T_DEAD) {
			*pp = t->next;
			tunnel_free(t);
			continue;
		}
		pp = &t->next;
	}
}

static void *pump_main(void *arg)
{
	struct epoll_event evs[64];

	(void)arg;
	while (!atomic_load(&P.stop)) {
		int n = epoll_wait(P.epfd, evs, (int)ARRAY_SIZE(evs), -1);

		for (int i = 0; i < n; i++) {
			struct end *e = evs[i].data.ptr;

			if (!e)
				take_incoming();
			else
				tunnel_run(e->t);
		}
		sweep();
	}
	return NULL;
}

/* Give t to the pump. */
static void hand_over(struct tunnel *t)
{
	uint64_t one = 1;

	pthread_mutex_lock(&P.lock);
	t->next = P.incoming;
	P.incoming = t;
	pthread_mutex_unlock(&P.lock);
	if (write(P.wake, &one, sizeof(one)) < 0)
		log_warn("redis tls: cannot wake the pump: %s", strerror(errno));
}

/* ----- The module ----- */

int redis_tls_open(const char *host, int port, int timeout_ms, char *why, size_t why_len)
{
	struct tunnel *t;
	int peer = -1;

	t = tunnel_new(host, port, timeout_ms, &peer, why, why_len);
	if (!t) {
		redis_tls_report_failure(host, port, why);
		return -1;
	}
	while (t->state < T_OPEN) {
		int64_t left = t->deadline_ms - now_ms();
		struct pollfd p = { .fd = t->tcp.fd };
		int rc = tunnel_setup(t, &p.events, why, why_len);

		if (rc > 0)
			break;
		if (rc == 0 && left <= 0)
			snprintf(why, why_len, "no %s within %d ms",
				 t->state == T_CONNECTING ? "TCP connection" : "TLS handshake",
				 timeout_ms);
		if (rc < 0 || left <= 0) {
			redis_tls_report_failure(t->ts.host, t->ts.port, why);
			close(peer);
			tunnel_free(t);
			return -1;
		}
		p.fd = t->tcp.fd;
		poll(&p, 1, (int)left);
	}
	hand_over(t);
	return peer;
}

int redis_tls_load(const char *ca, const char *cert, const char *key)
{
	if (redis_tls_session_load(ca, cert, key) < 0)
		return -1;
	P.epfd = epoll_create1(EPOLL_CLOEXEC);
	P.wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (P.epfd < 0 || P.wake < 0 ||
	    epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.wake,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = NULL }) < 0 ||
	    pthread_create(&P.thread, NULL, pump_main, NULL) != 0) {
		fprintf(stderr, "dlockd: cannot start the redis TLS thread: %s\n", strerror(errno));
		goto fail;
	}
	P.started = true;
	return 0;
fail:
	redis_tls_release();
	return -1;
}

void redis_tls_release(void)
{
	struct tunnel *t;

	if (P.started) {
		uint64_t one = 1;

		atomic_store(&P.stop, true);
		if (write(P.wake, &one, sizeof(one)) < 0)
			log_warn("redis tls: cannot wake the pump: %s", strerror(errno));
		pthread_join(P.thread, NULL);
		P.started = false;
	}
	while ((t = P.tunnels)) {
		P.tunnels = t->next;
		tunnel_kill(t);
		tunnel_free(t);
	}
	while ((t = P.incoming)) {
		P.incoming = t->next;
		tunnel_kill(t);
		tunnel_free(t);
	}
	if (P.epfd >= 0)
		close(P.epfd);
	if (P.wake >= 0)
		close(P.wake);
	P.epfd = P.wake = -1;
	redis_tls_session_unload();
}
