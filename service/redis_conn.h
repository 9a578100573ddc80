/* redis_conn.h -- connections to Redis: one per worker thread, plus the ones
 * the pubsub thread makes for itself. */
#ifndef DLOCKD_REDIS_CONN_H
#define DLOCKD_REDIS_CONN_H

#include <hiredis/hiredis.h>
#include <stdint.h>

struct redis_url {
	char *host;		/* NULL for a unix socket */
	int port;
	char *unix_path;	/* NULL for TCP */
	char *user;		/* NULL unless given */
	char *password;		/* NULL unless given */
	int db;
};

/* Parse redis://[user:password@]host[:port][/db] or unix:///path. Returns 0
 * and fills u (release it with redis_url_release), or -1 if malformed. */
int redis_url_parse(const char *s, struct redis_url *u);
void redis_url_release(struct redis_url *u);

/* Remember the URL every later connection uses; call once before threads. */
int redis_conn_setup(const char *url);
void redis_conn_cleanup(void);

/* A new connection, authenticated and on the right db, with the command
 * timeout set; NULL (and a log line) if Redis cannot be reached. The caller
 * frees it with redisFree(). */
redisContext *redis_conn_open(void);

/* The calling thread's connection, opened on first use and reopened after
 * redis_conn_thread_drop() no more often than a growing backoff allows.
 * NULL means Redis is unreachable right now: answer 503. Freed when the
 * thread exits. */
redisContext *redis_conn_thread(void);

/* The deadline, in Redis' clock (ms), for a command the thread sends now:
 * past it, dlockd will have given up waiting for the reply and answered
 * 503, so the command must then do nothing (lua/lib/common.lua checks it).
 * -1 when Redis is unreachable. */
int64_t redis_conn_deadline_ms(void);

/* The thread's connection failed (NULL reply or c->err): free it so the
 * next redis_conn_thread() reconnects. */
void redis_conn_thread_drop(void);

/* Run a command on the thread's connection. Returns the reply (free with
 * freeReplyObject) or NULL when Redis is unreachable; a dead connection is
 * dropped here, so callers only map NULL to "backend down". */
redisReply *redis_conn_command_argv(int argc, const char **argv, const size_t *argvlen);

#endif
