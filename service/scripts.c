/* scripts.c -- Lua scripts embedded at build time (build/lua_scripts.c is
 * generated from the files in lua/), loaded with SCRIPT LOAD and run with EVALSHA.
 *
 * The SHA1 of each script is learnt from the first SCRIPT LOAD and kept for
 * the life of the process: it depends only on the source, so every
 * connection and every Redis restart agrees on it. A NOSCRIPT reply (Redis
 * restarted or SCRIPT FLUSH) loads the script again and retries once. */
#include "scripts.h"

#include "redis_conn.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated from lua/ by the Makefile. */
struct lua_source {
	const char *name;
	const char *source;
};
extern const struct lua_source lua_sources[];
extern const unsigned lua_sources_count;

static const char *const script_names[SCRIPT_COUNT] = {
	[SCRIPT_LOCK_ACQUIRE] = "lock_acquire",
	[SCRIPT_LOCK_RELEASE] = "lock_release",
	[SCRIPT_LOCK_FORCE_RELEASE] = "lock_force_release",
	[SCRIPT_LOCK_RENEW] = "lock_renew",
	[SCRIPT_LOCK_STATUS] = "lock_status",
	[SCRIPT_FAIR_ACQUIRE] = "fair_acquire",
	[SCRIPT_FAIR_RELEASE] = "fair_release",
	[SCRIPT_FAIR_FORCE_RELEASE] = "fair_force_release",
	[SCRIPT_FAIR_DEQUEUE] = "fair_dequeue",
	[SCRIPT_RW_READ_ACQUIRE] = "rw_read_acquire",
	[SCRIPT_RW_READ_RELEASE] = "rw_read_release",
	[SCRIPT_RW_READ_RENEW] = "rw_read_renew",
	[SCRIPT_RW_WRITE_ACQUIRE] = "rw_write_acquire",
	[SCRIPT_RW_WRITE_RELEASE] = "rw_write_release",
	[SCRIPT_RW_WRITE_RENEW] = "rw_write_renew",
	[SCRIPT_RW_WRITE_DEQUEUE] = "rw_write_dequeue",
	[SCRIPT_RW_FORCE_RELEASE] = "rw_force_release",
	[SCRIPT_RW_STATUS] = "rw_status",
};

static struct {
	const char *source;
	char sha[41];		/* "" until the first SCRIPT LOAD */
} scripts[SCRIPT_COUNT];
static pthread_mutex_t sha_lock = PTHREAD_MUTEX_INITIALIZER;

int scripts_init(void)
{
	for (int id = 0; id < SCRIPT_COUNT; id++) {
		scripts[id].source = NULL;
		for (unsigned i = 0; i < lua_sources_count; i++)
			if (!strcmp(lua_sources[i].name, script_names[id]))
				scripts[id].source = lua_sources[i].source;
		if (!scripts[id].source)
			return -1;
	}
	return 0;
}

const char *scripts_name(enum script_id id)
{
	return script_names[id];
}

/* SCRIPT LOAD id; copies its SHA into sha. 0 on success, -1 when Redis is
 * down; a script Redis refuses to compile is a bug in lua/ and aborts. */
static int script_load(enum script_id id, char sha[41])
{
	const char *argv[] = { "SCRIPT", "LOAD", scripts[id].source };
	redisReply *r = redis_conn_command_argv(3, argv, NULL);

	if (!r)
		return -1;
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		fprintf(stderr, "fatal: redis refused script %s: %s\n", script_names[id],
			r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		abort();
	}
	pthread_mutex_lock(&sha_lock);
	memcpy(scripts[id].sha, r->str, 41);
	memcpy(sha, r->str, 41);
	pthread_mutex_unlock(&sha_lock);
	freeReplyObject(r);
	return 0;
}

redisReply *scripts_run(enum script_id id, int nkeys, const char *const *keys,
			int nargs, const char *const *args)
{
	const char *argv[3 + 16 + 1];
	char sha[41], nk[16], deadline[24];
	redisReply *r;
	int argc = 0;
	int64_t by;

	if (nkeys + nargs > 16)
		abort();
	pthread_mutex_lock(&sha_lock);
	memcpy(sha, scripts[id].sha, 41);
	pthread_mutex_unlock(&sha_lock);
	if (!sha[0] && script_load(id, sha) < 0)
		return NULL;

	snprintf(nk, sizeof(nk), "%d", nkeys);
	argv[argc++] = "EVALSHA";
	argv[argc++] = sha;
	argv[argc++] = nk;
	for (int i = 0; i < nkeys; i++)
		argv[argc++] = keys[i];
	for (int i = 0; i < nargs; i++)
		argv[argc++] = args[i];
	/* last: the deadline every script checks first (lua/lib/common.lua) */
	by = redis_conn_deadline_ms();
	if (by < 0)
		return NULL;
	snprintf(deadline, sizeof(deadline), "%lld", (long long)by);
	argv[argc++] = deadline;

	r = redis_conn_command_argv(argc, argv, NULL);
	if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8)) {
		freeReplyObject(r);
		if (script_load(id, sha) < 0)
			return NULL;
		r = redis_conn_command_argv(argc, argv, NULL);
	}
	return r;
}
