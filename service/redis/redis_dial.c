/* redis_dial.c -- making a connection to Redis (redis_dial.h): hiredis'
 * own connect for a unix socket or plain TCP; with a TLS URL, blocking, a
 * tunnel of redis_tls.c whose plain end is handed to hiredis (0.14 has no
 * TLS of its own) and made to look like what hiredis' own connect would
 * have made; non-blocking, hiredis' TCP connect, on which the caller
 * runs TLS itself (redis_tls_io.h). */
#include "service/redis/redis_dial.h"

#include "service/redis/redis_tls.h"
#include "service/redis/redis_tls_session.h"

#include <stdio.h>
#include <unistd.h>

static struct timeval tv_ms(int ms)
{
	return (struct timeval){ .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
}

void redis_set_timeout_ms(redisContext *c, int ms)
{
	redisSetTimeout(c, tv_ms(ms));
}

redisContext *redis_connect_tcp(const struct redis_url *url, const char *host, int port,
			       int timeout_ms, bool blocking)
{
	redisContext *c;
	char why[512];
	int fd;

	if (!blocking)
		return redisConnectNonBlock(host, port);	/* TLS: the caller's */
	if (!url->tls)
		return redisConnectWithTimeout(host, port, tv_ms(timeout_ms));
	/* hiredis 0.14 has no TLS: it gets the plain end of a tunnel
	 * (redis_tls.c), which redis_tls_open has logged the failure of */
	fd = redis_tls_open(host, port, timeout_ms + REDIS_TLS_HANDSHAKE_MS, why, sizeof(why));
	c = redisConnectFd(fd);		/* blocking and connected, as 0.14 makes it */
	if (!c) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (fd < 0) {
		c->err = REDIS_ERR_IO;
		snprintf(c->errstr, sizeof(c->errstr), "%.*s", (int)sizeof(c->errstr) - 1, why);
	} else {
		/* under TLS 1.3 a server that refuses the client's certificate
		 * (or its absence) says so only after the handshake: a reply to
		 * PING (PONG, or NOAUTH before AUTH) shows the session works, so
		 * that a caller never counts a doomed connection as made */
		redisReply *r;

		redisSetTimeout(c, tv_ms(timeout_ms + REDIS_TLS_HANDSHAKE_MS));
		r = redisCommand(c, "PING");
		if (r) {
			freeReplyObject(r);
		} else if (c->err == REDIS_ERR_EOF) {
			c->err = REDIS_ERR_IO;
			snprintf(c->errstr, sizeof(c->errstr), "the TLS session ended before "
				 "redis answered (the log says why)");
		} else {
			/* a server that stalls after the handshake: the tunnel saw
			 * nothing wrong, so this is where it is told */
			snprintf(why, sizeof(why), "no answer within %d ms after the TLS "
				 "handshake (%s)", timeout_ms + REDIS_TLS_HANDSHAKE_MS, c->errstr);
			redis_tls_report_failure(host, port, why);
			c->err = REDIS_ERR_IO;
			snprintf(c->errstr, sizeof(c->errstr), "%.*s", (int)sizeof(c->errstr) - 1,
				 why);
		}
	}
	return c;
}

redisContext *redis_connect_url(const struct redis_url *url, int timeout_ms, bool blocking)
{
	if (url->unix_path)
		return blocking ? redisConnectUnixWithTimeout(url->unix_path, tv_ms(timeout_ms))
				: redisConnectUnixNonBlock(url->unix_path);
	return redis_connect_tcp(url, url->host, url->port, timeout_ms, blocking);
}

int redis_setup_cmds(const struct redis_url *url, struct redis_setup_cmd cmds[2], char db[16])
{
	int n = 0;

	if (url->password) {
		struct redis_setup_cmd *a = &cmds[n++];

		a->argc = 0;
		a->argv[a->argc++] = "AUTH";
		if (url->user)
			a->argv[a->argc++] = url->user;
		a->argv[a->argc++] = url->password;
	}
	if (url->db) {
		snprintf(db, 16, "%d", url->db);
		cmds[n++] = (struct redis_setup_cmd){ 2, { "SELECT", db } };
	}
	return n;
}
