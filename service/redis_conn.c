/* redis_conn.c -- hiredis connections: URL parsing, AUTH and SELECT on
 * connect, and one synchronous context per worker thread.
 *
 * A worker's context lives in thread-local storage (a pthread key whose
 * destructor frees it when MHD's pool thread exits). When a command fails
 * the context is dropped and the thread reconnects on its next request,
 * but no sooner than its backoff (50 ms doubling to 1 s) so that a dead
 * Redis costs each request one clock read, not one connect(). */
#include "redis_conn.h"

#include "log.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CONNECT_TIMEOUT_MS 1000
#define COMMAND_TIMEOUT_MS 2000
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

struct thread_conn {
	redisContext *ctx;
	int64_t next_try_ms;	/* monotonic; no reconnect before this */
	int64_t backoff_ms;
	int64_t clock_offset_ms;	/* Redis' clock minus ours, at connect */
};

/* A command must have run this long after it was sent, or not at all
 * (redis_conn_deadline_ms); the rest of COMMAND_TIMEOUT_MS is for its
 * reply to arrive. */
#define DEADLINE_MS (COMMAND_TIMEOUT_MS - 500)

static struct redis_url conf_url;
static pthread_key_t conn_key;
static int conn_key_made;

/* ----- URL parsing ----- */

static char *dup_range(const char *a, const char *b)
{
	char *s = xmalloc((size_t)(b - a) + 1);

	memcpy(s, a, (size_t)(b - a));
	s[b - a] = '\0';
	return s;
}

static int parse_num(const char *a, const char *b, int min, int max, int *out)
{
	long v = 0;

	if (a == b || b - a > 9)
		return -1;
	for (const char *p = a; p < b; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

int redis_url_parse(const char *s, struct redis_url *u)
{
	const char *p, *at, *slash, *colon, *end;

	memset(u, 0, sizeof(*u));
	u->port = 6379;
	if (!strncmp(s, "unix://", 7)) {
		if (s[7] != '/' || s[8] == '\0')
			return -1;
		u->unix_path = xstrdup(s + 7);
		return 0;
	}
	if (strncmp(s, "redis://", 8))
		return -1;
	p = s + 8;
	end = p + strlen(p);
	slash = strchr(p, '/');
	if (!slash)
		slash = end;
	at = memchr(p, '@', (size_t)(slash - p));
	if (at) {
		colon = memchr(p, ':', (size_t)(at - p));
		if (!colon)
			goto fail;	/* "user@" alone is ambiguous; require user:password@ */
		if (colon > p)
			u->user = dup_range(p, colon);
		u->password = dup_range(colon + 1, at);
		p = at + 1;
	}
	if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(slash - p));

		if (!close)
			goto fail;
		u->host = dup_range(p + 1, close);
		colon = close + 1 < slash && close[1] == ':' ? close + 1 : NULL;
		if (!colon && close + 1 != slash)
			goto fail;
	} else {
		colon = memchr(p, ':', (size_t)(slash - p));
		u->host = dup_range(p, colon ? colon : slash);
	}
	if (!u->host[0])
		goto fail;
	if (colon && parse_num(colon + 1, slash, 1, 65535, &u->port) < 0)
		goto fail;
	if (slash < end && slash + 1 < end && parse_num(slash + 1, end, 0, 1000000, &u->db) < 0)
		goto fail;
	return 0;
fail:
	redis_url_release(u);
	return -1;
}

void redis_url_release(struct redis_url *u)
{
	free(u->host);
	free(u->unix_path);
	free(u->user);
	free(u->password);
	memset(u, 0, sizeof(*u));
}

/* ----- Opening a connection ----- */

static struct timeval tv_ms(int ms)
{
	return (struct timeval){ .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
}

/* Run a set-up command; 0 when it answered OK. */
static int setup_command(redisContext *c, int argc, const char **argv)
{
	redisReply *r = redisCommandArgv(c, argc, argv, NULL);
	int ok = r && r->type != REDIS_REPLY_ERROR;

	if (r && !ok)
		log_warn("redis %s failed: %s", argv[0], r->str);
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

redisContext *redis_conn_open(void)
{
	redisContext *c;

	if (conf_url.unix_path)
		c = redisConnectUnixWithTimeout(conf_url.unix_path, tv_ms(CONNECT_TIMEOUT_MS));
	else
		c = redisConnectWithTimeout(conf_url.host, conf_url.port, tv_ms(CONNECT_TIMEOUT_MS));
	if (!c)
		return NULL;
	if (c->err) {
		log_debug("redis connect failed: %s", c->errstr);
		goto fail;
	}
	redisSetTimeout(c, tv_ms(COMMAND_TIMEOUT_MS));
	if (!conf_url.unix_path)
		redisEnableKeepAlive(c);
	if (conf_url.password) {
		const char *auth2[] = { "AUTH", conf_url.password };
		const char *auth3[] = { "AUTH", conf_url.user, conf_url.password };

		if (conf_url.user ? setup_command(c, 3, auth3) : setup_command(c, 2, auth2))
			goto fail;
	}
	if (conf_url.db) {
		char db[16];
		const char *sel[] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", conf_url.db);
		if (setup_command(c, 2, sel))
			goto fail;
	}
	return c;
fail:
	redisFree(c);
	return NULL;
}

/* ----- Per-thread connection ----- */

static void thread_conn_free(void *p)
{
	struct thread_conn *tc = p;

	if (tc->ctx)
		redisFree(tc->ctx);
	free(tc);
}

int redis_conn_setup(const char *url)
{
	if (redis_url_parse(url, &conf_url) < 0)
		return -1;
	if (pthread_key_create(&conn_key, thread_conn_free))
		return -1;
	conn_key_made = 1;
	return 0;
}

void redis_conn_cleanup(void)
{
	struct thread_conn *tc;

	if (conn_key_made) {
		/* the main thread's own connection, if it made one */
		tc = pthread_getspecific(conn_key);
		if (tc) {
			thread_conn_free(tc);
			pthread_setspecific(conn_key, NULL);
		}
		pthread_key_delete(conn_key);
		conn_key_made = 0;
	}
	redis_url_release(&conf_url);
}

static struct thread_conn *thread_conn(void)
{
	struct thread_conn *tc = pthread_getspecific(conn_key);

	if (!tc) {
		tc = xcalloc(1, sizeof(*tc));
		tc->backoff_ms = BACKOFF_MIN_MS;
		pthread_setspecific(conn_key, tc);
	}
	return tc;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Learn how far Redis' clock is from ours (to half a round trip), so that
 * deadlines can be given in Redis' clock even when Redis runs elsewhere. */
static int measure_clock(struct thread_conn *tc)
{
	int64_t before = wall_ms(), after;
	redisReply *r = redisCommand(tc->ctx, "TIME");
	int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		 r->element[0]->type == REDIS_REPLY_STRING;

	after = wall_ms();
	if (ok)
		tc->clock_offset_ms = strtoll(r->element[0]->str, NULL, 10) * 1000 +
				      strtoll(r->element[1]->str, NULL, 10) / 1000 -
				      (before + after) / 2;
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

redisContext *redis_conn_thread(void)
{
	struct thread_conn *tc = thread_conn();
	int64_t now;

	if (tc->ctx)
		return tc->ctx;
	now = now_ms();
	if (now < tc->next_try_ms)
		return NULL;
	tc->ctx = redis_conn_open();
	if (tc->ctx && measure_clock(tc) < 0) {
		redisFree(tc->ctx);
		tc->ctx = NULL;
	}
	if (!tc->ctx) {
		tc->next_try_ms = now + tc->backoff_ms;
		tc->backoff_ms = tc->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
								    : tc->backoff_ms * 2;
		return NULL;
	}
	tc->backoff_ms = BACKOFF_MIN_MS;
	return tc->ctx;
}

int64_t redis_conn_deadline_ms(void)
{
	struct thread_conn *tc = thread_conn();

	if (!redis_conn_thread())
		return -1;
	return wall_ms() + tc->clock_offset_ms + DEADLINE_MS;
}

void redis_conn_thread_drop(void)
{
	struct thread_conn *tc = thread_conn();

	if (tc->ctx) {
		log_warn("redis connection lost: %s", tc->ctx->errstr[0] ? tc->ctx->errstr : "closed");
		redisFree(tc->ctx);
		tc->ctx = NULL;
	}
}

redisReply *redis_conn_command_argv(int argc, const char **argv, const size_t *argvlen)
{
	redisContext *c = redis_conn_thread();
	redisReply *r;

	if (!c)
		return NULL;
	r = redisCommandArgv(c, argc, argv, argvlen);
	if (!r || c->err) {
		if (r)
			freeReplyObject(r);
		redis_conn_thread_drop();
		return NULL;
	}
	return r;
}
