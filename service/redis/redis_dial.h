/* redis_dial.h -- making a connection to Redis, the one place it is done:
 * a unix socket, plain TCP, or a TLS tunnel (redis_tls.h) handed to
 * hiredis (a non-blocking TLS connection is plain TCP here: its caller
 * runs TLS on it, redis_tls_io.h); and the set-up commands (AUTH, SELECT) a new connection sends
 * before any other. Knows neither what the connection is for nor where a
 * sentinel URL's master is: the caller gives the address. Any thread. */
#ifndef DLOCKD_REDIS_DIAL_H
#define DLOCKD_REDIS_DIAL_H

#include "service/redis/redis_url.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>

/* How long dlockd's data connections (the loops', the subscriber's, the
 * start-up probes') give a connect; a TLS connection's handshake gets
 * REDIS_TLS_HANDSHAKE_MS more. */
#define REDIS_CONNECT_TIMEOUT_MS 1000
#define REDIS_TLS_HANDSHAKE_MS 1000

/* A hiredis context for host:port, the one way TCP connections to Redis
 * are made. blocking: connected within timeout_ms and blocking, plain
 * TCP, or with url->tls a TLS tunnel (redis_tls.h) whose plain end
 * hiredis reads and writes (its handshake gets REDIS_TLS_HANDSHAKE_MS
 * more); otherwise a TCP connect under way, non-blocking, whatever
 * url->tls says: with it, the caller runs TLS on the socket
 * (redis_tls_io.h). NULL only when out of memory; a connect that failed at once is a
 * context with err and errstr set. The caller frees it with redisFree(). */
redisContext *redis_connect_tcp(const struct redis_url *url, const char *host, int port,
				int timeout_ms, bool blocking);

/* The same for the URL's own address: its unix socket (unix://), or its
 * first host and port. */
redisContext *redis_connect_url(const struct redis_url *url, int timeout_ms, bool blocking);

/* Give each call of blocking context c ms to be answered (redisSetTimeout). */
void redis_set_timeout_ms(redisContext *c, int ms);

/* A command a new connection runs before any other. */
struct redis_setup_cmd {
	int argc;
	const char *argv[3];
};

/* The set-up commands url asks for, in order: AUTH (with its user, if
 * any) when it has a password, SELECT when its db is not 0. Returns how
 * many (0..2); cmds point into url and into db, which keeps SELECT's
 * argument. */
int redis_setup_cmds(const struct redis_url *url, struct redis_setup_cmd cmds[2], char db[16]);

#endif
