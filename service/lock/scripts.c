/* scripts.c -- Lua scripts embedded at build time (lua_sources[], which
 * lua/gen-scripts.sh generates from the files in lua/ into
 * $(BUILD)/lua_scripts.c), run with EVALSHA on a pipelined connection
 * (redis_conn.c) that the caller names.
 *
 * The SHA1 of each script is learnt from a SCRIPT LOAD sent (pipelined)
 * with its first call, which itself goes as EVAL, and kept for the life of
 * the process: it depends only on the source, so every connection and
 * every Redis restart agrees on it. A refused SCRIPT LOAD is only logged
 * (the EVAL behind it answers the caller) and tried again on the next call. A NOSCRIPT reply (Redis restarted or
 * SCRIPT FLUSH) is retried once with EVAL, which caches the script again. */
#include "service/lock/scripts.h"

#include "service/base/log.h"
#include "service/base/util.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	char sha[41];		/* "" until the first SCRIPT LOAD */
} scripts[SCRIPT_COUNT];
static pthread_mutex_t sha_lock = PTHREAD_MUTEX_INITIALIZER;

/* What the scripts publish with (lua/lib/common.lua): set before the
 * loops start, read only after. */
static const char *publish_command = "publish";

void scripts_set_sharded(bool sharded)
{
	publish_command = sharded ? "spublish" : "publish";
}

const char *scripts_publish_command(void)
{
	return publish_command;
}

int scripts_init(void)
{
	for (int id = 0; id < SCRIPT_COUNT; id++)
		if (!lua_sources[id].name || !lua_sources[id].source)
			return -1;
	return 0;
}

const char *scripts_name(enum script_id id)
{
	return lua_sources[id].name;
}

/* Learn a script's SHA from SCRIPT LOAD (sent before its EVAL until one
 * is learnt). Redis may refuse it at any time -- busy with another
 * client's script, loading, an ACL without SCRIPT -- and then no SHA is
 * kept: the EVAL behind it gets its own error, which the caller answers
 * (a 503), and the next call loads again. */
static void on_loaded(void *ctx, redisReply *r)
{
	enum script_id id = (enum script_id)(intptr_t)ctx;

	if (!r)
		return;
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		log_warn("redis did not load script %s: %s", lua_sources[id].name,
			 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		return;
	}
	pthread_mutex_lock(&sha_lock);
	memcpy(scripts[id].sha, r->str, 41);
	pthread_mutex_unlock(&sha_lock);
}

/* One script call: its arguments are kept for a retry with EVAL. */
struct script_call {
	struct redis_conn *conn;	/* the retry with EVAL goes on it too */
	enum script_id id;
	bool retried;
	int64_t sent_ms;		/* the first send: the retry keeps its deadline */
	redis_reply_fn fn;
	void *ctx;
	int argc;			/* numkeys, keys and args */
	const char *argv[REDIS_CONN_MAX_ARGS];
	char data[];			/* the strings argv points into */
};

static void send_call(struct script_call *c, bool whole);

static void on_script_reply(void *ctx, redisReply *r)
{
	struct script_call *c = ctx;

	if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8) &&
	    !c->retried) {
		c->retried = true;
		send_call(c, true);
		return;
	}
	c->fn(c->ctx, r);
	free(c);
}

static void send_call(struct script_call *c, bool whole)
{
	const char *argv[REDIS_CONN_MAX_ARGS], *source = lua_sources[c->id].source;
	char sha[41];
	int argc = 0;

	pthread_mutex_lock(&sha_lock);
	memcpy(sha, scripts[c->id].sha, 41);
	pthread_mutex_unlock(&sha_lock);
	if (!sha[0] && !whole)
		redis_conn_send(c->conn, 3, (const char *[]){ "SCRIPT", "LOAD", source }, NULL,
				false, on_loaded, (void *)(intptr_t)c->id);
	whole = whole || !sha[0];
	argv[argc++] = whole ? "EVAL" : "EVALSHA";
	argv[argc++] = whole ? source : sha;
	for (int i = 0; i < c->argc; i++)
		argv[argc++] = c->argv[i];
	redis_conn_send_from(c->conn, argc, argv, NULL, c->sent_ms, on_script_reply, c);
}

void scripts_run(struct redis_conn *conn, enum script_id id, int nkeys, const char *const *keys,
		 int nargs, const char *const *args, redis_reply_fn fn, void *ctx)
{
	size_t size = 16;
	struct script_call *c;
	char *at;

	if (nkeys + nargs + 4 >= REDIS_CONN_MAX_ARGS)
		abort();
	for (int i = 0; i < nkeys; i++)
		size += strlen(keys[i]) + 1;
	for (int i = 0; i < nargs; i++)
		size += strlen(args[i]) + 1;
	c = xmalloc(sizeof(*c) + size);
	c->conn = conn;
	c->id = id;
	c->retried = false;
	c->sent_ms = now_ms();
	c->fn = fn;
	c->ctx = ctx;
	c->argc = 0;
	at = c->data;
	at = put_decimal(at, nkeys);
	*at++ = '\0';
	c->argv[c->argc++] = c->data;
	for (int i = 0; i < nkeys + nargs; i++) {
		const char *s = i < nkeys ? keys[i] : args[i - nkeys];
		size_t n = strlen(s) + 1;

		memcpy(at, s, n);
		c->argv[c->argc++] = at;
		at += n;
	}
	c->argv[c->argc++] = publish_command;	/* static: not copied */
	send_call(c, false);
}
