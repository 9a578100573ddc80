/* scripts.h -- the Lua scripts of lua/, run with EVALSHA on a pipelined
 * Redis connection (the calling event loop's). */
#ifndef DLOCKD_SCRIPTS_H
#define DLOCKD_SCRIPTS_H

#include "service/redis/redis_conn.h"

#include <stdbool.h>

enum script_id {
	SCRIPT_LOCK_ACQUIRE,
	SCRIPT_LOCK_RELEASE,
	SCRIPT_LOCK_FORCE_RELEASE,
	SCRIPT_LOCK_RENEW,
	SCRIPT_LOCK_STATUS,
	SCRIPT_FAIR_ACQUIRE,
	SCRIPT_FAIR_RELEASE,
	SCRIPT_FAIR_FORCE_RELEASE,
	SCRIPT_FAIR_DEQUEUE,
	SCRIPT_FAIR_REFRESH,
	SCRIPT_RW_READ_ACQUIRE,
	SCRIPT_RW_READ_RELEASE,
	SCRIPT_RW_READ_RENEW,
	SCRIPT_RW_WRITE_ACQUIRE,
	SCRIPT_RW_WRITE_RELEASE,
	SCRIPT_RW_WRITE_RENEW,
	SCRIPT_RW_WRITE_DEQUEUE,
	SCRIPT_RW_FORCE_RELEASE,
	SCRIPT_RW_STATUS,
	SCRIPT_LOCK_LIST,
	SCRIPT_COUNT
};

/* Bind every script id to its embedded source; -1 if one is missing. */
int scripts_init(void);
/* Scripts publish with SPUBLISH (sharded channels) instead of PUBLISH.
 * Before the loops start. */
void scripts_set_sharded(bool sharded);
/* "publish" or "spublish": what dlockd publishes with, scripts or not. */
const char *scripts_publish_command(void);

/* Run script id with keys and args (copied) on connection c, from the
 * thread of c's loop, followed by the publish command and the deadline
 * argument (lua/lib/common.lua). Until its SHA is
 * known, and once more after NOSCRIPT (Redis lost its script cache), the
 * script goes in whole with EVAL (on c too). fn gets the reply, REDIS_REPLY_ERROR included, or NULL when
 * Redis is unreachable; it is called later, never from inside this call. */
void scripts_run(struct redis_conn *c, enum script_id id, int nkeys, const char *const *keys,
		 int nargs, const char *const *args, redis_reply_fn fn, void *ctx);

/* The name of a script, by id ("lock_acquire"), for log lines. */
const char *scripts_name(enum script_id id);

#endif
