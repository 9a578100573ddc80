/* redis_tls_io.c -- TLS in a pipelined connection's own I/O
 * (redis_tls_io.h): hiredis 0.14 has no TLS, but redis_node.c drives its
 * non-blocking context by hand, so the socket hiredis connected is the
 * TCP socket to Redis itself and GnuTLS runs on it, on the loop's
 * thread: no tunnel, no thread hop, no copy through a socket pair.
 *
 * The session is set up, verified and judged by redis_tls_session.c, as
 * the tunnels' are: nothing of the context's output buffer is sent
 * before the handshake is over and the server's certificate verified.
 * Writing follows redisBufferWrite: gnutls_record_send from the head of
 * c->obuf, the part sent cut off, the rest kept; after GNUTLS_E_AGAIN
 * the record GnuTLS has already made is finished first (send with NULL,
 * as GnuTLS asks), and only then is more taken. Reading follows
 * redisBufferRead: gnutls_record_recv into the reply reader
 * (redisReaderFeed), and again while GnuTLS holds decrypted data
 * (gnutls_record_check_pending): that data is off the socket already and
 * would not wake the loop.
 *
 * GnuTLS' own transport reads a record in two recv() calls (its header,
 * then the rest); a round trip of a few small replies is one record, so
 * the session reads through a buffer of its own instead (pull): one
 * recv() of up to READ_AHEAD bytes, from which GnuTLS takes what it asks
 * for. What is left in it is read, like GnuTLS' pending data, before the
 * loop sleeps: the socket will not say it is there. */
#include "service/redis/redis_tls_io.h"

#include "service/base/util.h"
#include "service/redis/redis_tls_session.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* One TLS record's plaintext, at most. */
#define READ_SIZE (16 * 1024)
/* What one recv() takes from the socket: a full record and its framing. */
#define READ_AHEAD (READ_SIZE + 512)

struct redis_tls_io {
	struct redis_tls_session ts;
	int64_t deadline_ms;	/* monotonic: connected and verified by then */
	int timeout_ms;
	bool hs_write;		/* the handshake waits for the socket to be writable */
	bool send_blocked;	/* a record is partly sent: finish it first */
	int fd;			/* c's socket (the context's) */
	size_t in_off, in_len;	/* in[in_off..in_len): read, not yet GnuTLS' */
	unsigned char in[READ_AHEAD];
};

/* GnuTLS' transport: reads served from t->in, refilled by one recv(). */
static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct redis_tls_io *t = p;
	size_t n;

	if (t->in_off == t->in_len) {
		ssize_t got = recv(t->fd, t->in, sizeof(t->in), 0);

		if (got <= 0) {
			if (got < 0)
				gnutls_transport_set_errno(t->ts.s, errno);
			return got;
		}
		t->in_off = 0;
		t->in_len = (size_t)got;
	}
	n = t->in_len - t->in_off < len ? t->in_len - t->in_off : len;
	memcpy(buf, t->in + t->in_off, n);
	t->in_off += n;
	return (ssize_t)n;
}

/* Only if GnuTLS waits itself (it does not: no record or handshake
 * timeout of its own is set). */
static int pull_timeout(gnutls_transport_ptr_t p, unsigned ms)
{
	struct redis_tls_io *t = p;
	struct pollfd pfd = { .fd = t->fd, .events = POLLIN };

	if (t->in_off < t->in_len)
		return 1;
	return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static ssize_t push(gnutls_transport_ptr_t p, const giovec_t *iov, int iovcnt)
{
	struct redis_tls_io *t = p;
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t n = sendmsg(t->fd, &m, MSG_NOSIGNAL);

	if (n < 0)
		gnutls_transport_set_errno(t->ts.s, errno);
	return n;
}

/* c fails with why, which is logged (once per host:port and reason). */
static void fail(struct redis_tls_io *t, redisContext *c, const char *why)
{
	redis_tls_report_failure(t->ts.host, t->ts.port, why);
	c->err = REDIS_ERR_IO;
	snprintf(c->errstr, sizeof(c->errstr), "%.*s", (int)sizeof(c->errstr) - 1, why);
}

/* c fails as GnuTLS' rc says. */
static void fail_rc(struct redis_tls_io *t, redisContext *c, int rc)
{
	char why[REDIS_TLS_WHY_MAX];

	redis_tls_session_describe(&t->ts, rc, why, sizeof(why));
	fail(t, c, why);
}

struct redis_tls_io *redis_tls_io_new(redisContext *c, const char *host, int port,
				      int timeout_ms)
{
	struct redis_tls_io *t = xcalloc(1, sizeof(*t));
	char why[REDIS_TLS_WHY_MAX];

	if (redis_tls_session_init(&t->ts, host, port, why, sizeof(why)) < 0) {
		fail(t, c, why);
		free(t);
		return NULL;
	}
	t->timeout_ms = timeout_ms;
	t->deadline_ms = now_ms() + timeout_ms;
	t->fd = c->fd;
	gnutls_transport_set_ptr(t->ts.s, t);
	gnutls_transport_set_pull_function(t->ts.s, pull);
	gnutls_transport_set_pull_timeout_function(t->ts.s, pull_timeout);
	gnutls_transport_set_vec_push_function(t->ts.s, push);
	return t;
}

void redis_tls_io_free(struct redis_tls_io *t)
{
	if (!t)
		return;
	if (t->ts.handshaken)
		gnutls_bye(t->ts.s, GNUTLS_SHUT_WR);	/* close_notify, if it goes at once */
	redis_tls_session_deinit(&t->ts);
	free(t);
}

int redis_tls_io_handshake(struct redis_tls_io *t, redisContext *c)
{
	char why[REDIS_TLS_WHY_MAX];
	int rc;

	if (t->ts.handshaken)
		return 1;
	do	/* records already in t->in will not wake the socket */
		rc = redis_tls_session_handshake(&t->ts, &t->hs_write, why, sizeof(why));
	while (rc == 0 && !t->hs_write && t->in_off < t->in_len);
	if (rc < 0)
		fail(t, c, why);
	return rc;
}

bool redis_tls_io_ready(const struct redis_tls_io *t)
{
	return t->ts.handshaken;
}

bool redis_tls_io_wants_write(const struct redis_tls_io *t)
{
	return t->ts.handshaken ? t->send_blocked : t->hs_write;
}

int64_t redis_tls_io_deadline(const struct redis_tls_io *t)
{
	return t->ts.handshaken ? INT64_MAX : t->deadline_ms;
}

void redis_tls_io_late(struct redis_tls_io *t, redisContext *c, bool connected)
{
	char why[96];

	snprintf(why, sizeof(why), "no %s within %d ms",
		 connected ? "TLS handshake" : "TCP connection", t->timeout_ms);
	fail(t, c, why);
}

int redis_tls_io_write(struct redis_tls_io *t, redisContext *c, int *done)
{
	while (sdslen(c->obuf) > 0) {
		/* after E_AGAIN GnuTLS finishes the record it made (NULL, 0)
		 * and says how much of the buffer that was */
		ssize_t n = t->send_blocked ? gnutls_record_send(t->ts.s, NULL, 0)
					    : gnutls_record_send(t->ts.s, c->obuf,
								 sdslen(c->obuf));

		t->send_blocked = n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED;
		if (t->send_blocked)
			break;
		if (n < 0) {
			fail_rc(t, c, (int)n);
			return REDIS_ERR;
		}
		if ((size_t)n == sdslen(c->obuf)) {
			sdsfree(c->obuf);
			c->obuf = sdsempty();
		} else {
			sdsrange(c->obuf, (int)n, -1);
		}
	}
	if (done)
		*done = sdslen(c->obuf) == 0;
	return REDIS_OK;
}

int redis_tls_io_read(struct redis_tls_io *t, redisContext *c)
{
	char buf[READ_SIZE], why[REDIS_TLS_WHY_MAX];

	do {
		ssize_t n = gnutls_record_recv(t->ts.s, buf, sizeof(buf));

		if (n > 0) {
			redis_tls_session_answered(&t->ts);
			if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
				c->err = c->reader->err;
				snprintf(c->errstr, sizeof(c->errstr), "%s", c->reader->errstr);
				return REDIS_ERR;
			}
		} else if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED ||
			   n == GNUTLS_E_REHANDSHAKE) {
			/* GnuTLS says "again" after a message of its own (a
			 * session ticket) too, with more records in t->in */
			if (t->in_off == t->in_len)
				break;
		} else if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
			redis_tls_session_closed(&t->ts, why, sizeof(why));
			if (why[0]) {
				fail(t, c, why);
			} else {
				c->err = REDIS_ERR_EOF;
				snprintf(c->errstr, sizeof(c->errstr), "Server closed the connection");
			}
			return REDIS_ERR;
		} else {
			fail_rc(t, c, (int)n);
			return REDIS_ERR;
		}
	} while (gnutls_record_check_pending(t->ts.s) > 0 || t->in_off < t->in_len);
	return REDIS_OK;
}
