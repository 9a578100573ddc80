/* scripts.c -- Lua scripts embedded at build time (lua_sources[], which
 * lua/gen-scripts.sh generates from the files in lua/ into
 * $(BUILD)/lua_scripts.c), run on a pipelined connection (redis_conn.c)
 * that the caller names: as Redis functions (FCALL) where Redis has them,
 * else with EVALSHA.
 *
 * Functions. Every script is also a function of one library, lua_library
 * (gen-scripts.sh): its library locals are made once, when Redis loads
 * it, where EVAL and EVALSHA make them on every call (about half of what a
 * lock's call cost Redis). dlockd loads it as it starts (scripts_load, on
 * the master of slot 0). Until the library is known loaded, calls go as
 * EVALSHA, and the first of them sends FUNCTION LOAD before it, on the
 * node of its first key (a cluster's nodes each need it; a replica gets
 * it from its master). Loaded, or there already ("already exists": another
 * dlockd of the same build, or a restart), calls go as FCALL. A Redis
 * without functions (before 7.0: "unknown command") or a user refused
 * FUNCTION LOAD or FCALL (NOPERM) keeps EVALSHA for a minute, then dlockd
 * asks again (Redis may have been upgraded, the ACL changed); any other
 * refusal (BUSY, LOADING, OOM, ...) is tried again a second later. An
 * FCALL answered "Function not found" (Redis restarted without its data,
 * FUNCTION FLUSH, a cluster node that never had it) or refused NOPERM is
 * sent again once, whole, with EVAL, after a FUNCTION LOAD to its node
 * (not after NOPERM). Nothing ran, so the retry changes nothing twice.
 *
 * Redis refuses a function that may write, before it runs, when it is
 * over its maxmemory (unless flagged allow-oom) or refuses writes
 * (min-replicas-to-write, MISCONF); a script without flags (EVAL) runs
 * until its first write. So the scripts that give back or renew are
 * flagged allow-oom and those that only read no-writes (lua/ "flags:"
 * lines): on a Redis out of memory releases, heartbeats and status reads
 * run whole, and an acquire is refused whole, as its first write was.
 *
 * EVALSHA. The SHA1 of each script is learnt from a SCRIPT LOAD sent (pipelined)
 * with its first call, which itself goes as EVAL, and kept for the life of
 * the process: it depends only on the source, so every connection and
 * every Redis restart agrees on it. A refused SCRIPT LOAD is only logged
 * (the EVAL behind it answers the caller) and tried again on the next
 * call. A NOSCRIPT reply (Redis restarted or SCRIPT FLUSH) is retried once
 * with EVAL, which caches the script again.
 *
 * Either way a retry keeps the call's first deadline. */
#include "service/lock/scripts.h"

#include "service/base/log.h"
#include "service/base/util.h"
#include "service/redis/cluster_slots.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	char sha[41];		/* "" until the first SCRIPT LOAD */
} scripts[SCRIPT_COUNT];
/* Whether Redis has the library (all under sha_lock). */
static enum {
	FN_UNTRIED,		/* not known: a call sends FUNCTION LOAD */
	FN_LOADING,		/* a FUNCTION LOAD is out */
	FN_READY,		/* calls go as FCALL */
} fn_state;
static int64_t fn_retry_ms;	/* FN_UNTRIED: no FUNCTION LOAD before this */
static bool fn_refusal_logged;	/* since functions last ran */
/* Ready on a LOAD's "already exists" that followed a "Function not found"
 * (another dlockd reloaded it at the same time, or a library has dlockd's
 * name and not its functions): until an FCALL runs, one more "Function
 * not found" means the latter. */
static atomic_bool fn_on_trust;
/* After a refusal (no functions, NOPERM), and after any other error. */
#define FN_REFUSED_RETRY_MS 60000
#define FN_ERROR_RETRY_MS 1000
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

	if (!r || redis_reply_made_up(r))
		return;	/* not loaded, and Redis said nothing about it */
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		log_warn("redis did not load script %s: %s", lua_sources[id].name,
			 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		return;
	}
	pthread_mutex_lock(&sha_lock);
	memcpy(scripts[id].sha, r->str, 41);
	pthread_mutex_unlock(&sha_lock);
}

/* Redis refused dlockd's functions: log it the first time (again once
 * they ran since). */
static void log_refusal(const char *what, const char *why)
{
	bool first;

	pthread_mutex_lock(&sha_lock);
	first = !fn_refusal_logged;
	fn_refusal_logged = true;
	pthread_mutex_unlock(&sha_lock);
	if (first)
		log_warn("redis refused %s (%s): dlockd runs its scripts with EVALSHA, which costs "
			 "Redis more a call, and asks again every minute", what, why);
}

/* FUNCTION LOAD's reply: the library's name, or why not. "already
 * exists" is loaded only for dlockd's library's own name (a function of
 * another library under one of its functions' names is no library of
 * dlockd's); after an FCALL its node answered "Function not found"
 * (after_lost), on trust (fn_on_trust). */
static void on_library_loaded(void *ctx, redisReply *r)
{
	bool after_lost = ctx != NULL, existed = false, ready, refused, resumed = false;
	char name[96];

	snprintf(name, sizeof(name), "Library '%s' already exists", lua_library_name);
	if (r && r->type == REDIS_REPLY_ERROR)
		existed = strstr(r->str, name) != NULL;
	ready = r && (r->type == REDIS_REPLY_STRING || existed);
	refused = r && r->type == REDIS_REPLY_ERROR && !ready &&
		  (!strncmp(r->str, "ERR unknown command", 19) ||
		   !strncmp(r->str, "ERR unknown subcommand", 22) ||
		   !strncmp(r->str, "NOPERM", 6) || strstr(r->str, "already exists"));
	pthread_mutex_lock(&sha_lock);
	if (fn_state == FN_LOADING) {
		fn_state = ready ? FN_READY : FN_UNTRIED;
		fn_retry_ms = now_ms() + (refused ? FN_REFUSED_RETRY_MS : FN_ERROR_RETRY_MS);
	}
	if (ready) {
		resumed = fn_refusal_logged;
		fn_refusal_logged = false;
		atomic_store(&fn_on_trust, existed && after_lost);
	}
	pthread_mutex_unlock(&sha_lock);
	if (resumed)
		log_info("redis runs dlockd's scripts as functions again");
	else if (refused)
		log_refusal("FUNCTION LOAD", r->str);
	else if (!ready)
		log_debug("redis did not load dlockd's functions: %s; trying again in a second",
			  !r ? "no reply" : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
}

/* One script call: its arguments are kept for a retry with EVAL. */
struct script_call {
	struct redis_conn *conn;	/* the retry with EVAL goes on it too */
	enum script_id id;
	bool retried;
	bool fcall;			/* the last send was an FCALL */
	bool lost;			/* it was answered "Function not found" */
	int64_t sent_ms;		/* the first send: the retry keeps its deadline */
	redis_reply_fn fn;
	void *ctx;
	int argc;			/* numkeys, keys and args */
	const char *argv[REDIS_CONN_MAX_ARGS];
	char data[];			/* the strings argv points into */
};

static void send_call(struct script_call *c, bool whole);

/* An FCALL that Redis did not run: it has no such function (so load the
 * library again), or the user may not call functions (so EVALSHA for a
 * minute). Either way nothing ran and the call goes again as EVAL. */
enum fcall_refusal { FCALL_RAN, FCALL_LOST, FCALL_DENIED };

static enum fcall_refusal fcall_refused(const redisReply *r)
{
	enum fcall_refusal why = FCALL_RAN;
	bool squat;

	if (!strncmp(r->str, "ERR Function not found", 22))
		why = FCALL_LOST;
	else if (!strncmp(r->str, "NOPERM", 6) && strstr(r->str, "'fcall' command"))
		why = FCALL_DENIED;
	if (why == FCALL_RAN)
		return why;
	squat = why == FCALL_LOST && atomic_exchange(&fn_on_trust, false);
	pthread_mutex_lock(&sha_lock);
	if (fn_state == FN_READY) {
		fn_state = FN_UNTRIED;
		fn_retry_ms = why == FCALL_DENIED || squat ? now_ms() + FN_REFUSED_RETRY_MS : 0;
	}
	pthread_mutex_unlock(&sha_lock);
	if (why == FCALL_DENIED)
		log_refusal("FCALL", r->str);
	else if (squat)
		log_refusal("FCALL", "a library of dlockd's name has not its functions: "
			    "FUNCTION DELETE it");
	return why;
}

static void on_script_reply(void *ctx, redisReply *r)
{
	struct script_call *c = ctx;
	enum fcall_refusal why = FCALL_RAN;

	if (r && r->type == REDIS_REPLY_ERROR && !c->retried &&
	    (c->fcall ? (why = fcall_refused(r)) != FCALL_RAN
		      : !strncmp(r->str, "NOSCRIPT", 8))) {
		c->retried = true;
		c->lost = why == FCALL_LOST;
		send_call(c, true);
		return;
	}
	if (c->fcall && r && !redis_reply_made_up(r) &&
	    atomic_load_explicit(&fn_on_trust, memory_order_relaxed))
		atomic_store(&fn_on_trust, false);	/* the library has its functions */
	c->fn(c->ctx, r);
	free(c);
}

/* Whether a call is to send FUNCTION LOAD now (the library's state is
 * not known and no try is due later), marking it under way; under
 * sha_lock. */
static bool load_due_locked(void)
{
	if (fn_state != FN_UNTRIED || now_ms() < fn_retry_ms)
		return false;
	fn_state = FN_LOADING;
	return true;
}

/* FUNCTION LOAD on conn, on the master of slot (after an FCALL found no
 * function there, if lost). */
static void send_library(struct redis_conn *conn, int slot, bool lost)
{
	redis_conn_send_slot(conn, slot, 3, (const char *[]){ "FUNCTION", "LOAD", lua_library },
			     NULL, on_library_loaded, lost ? (void *)1 : NULL);
}

/* FUNCTION LOAD, on the node of the call's first key (after c's FCALL
 * found no function there, if c->lost). */
static void load_library(const struct script_call *c)
{
	int slot = 0;

	if (strcmp(c->argv[0], "0"))
		slot = (int)cluster_key_slot(c->argv[1], strlen(c->argv[1]));
	send_library(c->conn, slot, c->lost);
}

void scripts_load(struct redis_conn *c)
{
	bool load;

	pthread_mutex_lock(&sha_lock);
	load = load_due_locked();
	pthread_mutex_unlock(&sha_lock);
	if (load)
		send_library(c, 0, false);
}

static void send_call(struct script_call *c, bool whole)
{
	const char *argv[REDIS_CONN_MAX_ARGS], *source = lua_sources[c->id].source;
	char sha[41];
	int argc = 0;
	bool load;

	pthread_mutex_lock(&sha_lock);
	memcpy(sha, scripts[c->id].sha, 41);
	c->fcall = !whole && fn_state == FN_READY;
	load = load_due_locked();
	pthread_mutex_unlock(&sha_lock);
	if (load)
		load_library(c);
	if (c->fcall) {
		argv[argc++] = "FCALL";
		argv[argc++] = lua_sources[c->id].function;
	} else {
		if (!sha[0] && !whole)
			redis_conn_send(c->conn, 3, (const char *[]){ "SCRIPT", "LOAD", source },
					NULL, false, on_loaded, (void *)(intptr_t)c->id);
		whole = whole || !sha[0];
		argv[argc++] = whole ? "EVAL" : "EVALSHA";
		argv[argc++] = whole ? source : sha;
	}
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
	c->lost = false;
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
