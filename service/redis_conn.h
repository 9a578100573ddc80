/* redis_conn.h -- connections to Redis: one pipelined connection per event
 * loop thread, plus the blocking ones the pubsub thread makes for itself. */
#ifndef DLOCKD_REDIS_CONN_H
#define DLOCKD_REDIS_CONN_H

#include "redis_url.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

/* What an error reply of Redis means, for a person, when it says Redis
 * cannot serve the command now or not for dlockd as set up (BUSY, LOADING,
 * MASTERDOWN, READONLY, OOM, NOPERM, NOAUTH, TRYAGAIN, CLUSTERDOWN, MOVED,
 * MISCONF, NOREPLICAS, and DLOCKD_LATE from the scripts' deadline check):
 * a sentence (static) for a 503; the command changed nothing. NULL for any
 * other error: a script failed (a bug, or data it cannot read). The one
 * place where Redis' error codes are told apart. */
const char *redis_error_unavailable(const char *err);

/* Remember the URL every later connection uses; call once before threads.
 * -1 (and a log line saying why) if the URL is malformed. */
int redis_conn_setup(const char *url);
void redis_conn_cleanup(void);

/* A new connection, authenticated and on the right db, with the command
 * timeout set; NULL (and a log line) if Redis cannot be reached. The caller
 * frees it with redisFree(). */
redisContext *redis_conn_open(void);

/* ----- The event loop's connection (one per loop thread) -----
 *
 * Commands are pipelined: redis_conn_send() only appends to a buffer, the
 * loop writes it when the socket is writable and hands replies to their
 * callbacks in send order. Everything below runs on the loop's thread. */

#define REDIS_CONN_MAX_ARGS 24

/* A command's outcome: its reply (freed by redis_conn after the call), or
 * NULL when Redis is unreachable or did not answer within 2 s of the send
 * (answer 503: by then a command with a deadline can no longer take
 * effect). */
typedef void (*redis_reply_fn)(void *ctx, redisReply *r);

enum { REDIS_CONN_READ = 1, REDIS_CONN_WRITE = 2 };

void redis_conn_thread_init(void);
/* Fail what is still waiting (its callbacks run) and free the connection. */
void redis_conn_thread_exit(void);

/* Queue a command; fn is called exactly once, later, from
 * redis_conn_on_readable() or redis_conn_run(). With deadline, the last
 * argument added is the time in Redis' clock (ms) past which dlockd will
 * have given up on the reply, so the command must then do nothing
 * (lua/lib/common.lua checks it). */
void redis_conn_send(int argc, const char **argv, const size_t *lens, bool deadline,
		     redis_reply_fn fn, void *ctx);

/* The socket to watch and for what (REDIS_CONN_*), or -1 while down;
 * *generation changes with every new connection, since a new socket may
 * get the number of the one just closed (which left the epoll set). */
int redis_conn_fd(unsigned *events, unsigned *generation);
/* Write what is queued, as far as the socket takes it. */
void redis_conn_flush(void);
/* The socket reported writable: finish connecting, then flush. */
void redis_conn_on_writable(void);
/* The socket is readable: read and hand out the replies. */
void redis_conn_on_readable(void);
/* Give up on a command past its time and tell failed commands; true when
 * a callback ran. */
bool redis_conn_run(int64_t now_ms);
/* Milliseconds until redis_conn_run has something to do; -1: nothing. */
int64_t redis_conn_timeout_ms(int64_t now_ms);
/* No command is waiting for a reply. */
bool redis_conn_idle(void);

#endif
