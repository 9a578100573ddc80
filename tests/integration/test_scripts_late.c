/* test_scripts_late.c -- a script call that reaches Redis after its
 * deadline changes nothing; one that only reads needs no clock.
 *
 * dlockd answers 503 once a call's deadline has passed, so the call must
 * never take effect when Redis runs it later (lua/lib/common.lua). The
 * check is made before a call's first command that is not a read, so a
 * refused try (two reads) runs no TIME. The first test replays every
 * script call of a workload of every kind on a second Redis, each one
 * first with a deadline long past, then as sent: the late copy must leave
 * that Redis' data and its channels as they were, at whatever state the
 * workload had brought it to. */
#include "tests/harness/harness.h"

#include <hiredis/sds.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const one_thread[] = { "--threads", "1", NULL };

#define END_MARK "dlockd-test-workload-done"
#define MAX_CALLS 2000

/* A field of INFO section on rs, as a number; -1 if absent. */
static long long info_field(const struct redis_srv *rs, const char *section, const char *field)
{
	redisReply *r = rcmd_on(rs, "INFO %s", section);
	long long v = -1;
	char key[96];
	const char *p;

	snprintf(key, sizeof(key), "\r\n%s:", field);
	if (r && r->type == REDIS_REPLY_STRING && (p = strstr(r->str, key)))
		v = strtoll(p + strlen(key), NULL, 10);
	freeReplyObject(r);
	return v;
}

/* What a call may change: the data (every write counts in
 * rdb_changes_since_last_save) and the channels (PUBLISH, SPUBLISH). */
static long long changes_of(const struct redis_srv *rs)
{
	long long pub = redis_cmdstat(rs, "publish", "calls");
	long long spub = redis_cmdstat(rs, "spublish", "calls");

	return info_field(rs, "persistence", "rdb_changes_since_last_save") * 1000000 +
	       (pub > 0 ? pub : 0) + (spub > 0 ? spub : 0);
}

/* The script calls of a MONITOR stream, in order, until END_MARK: each a
 * vector of sds arguments (FCALL name numkeys keys... args...). */
struct calls {
	sds *argv[MAX_CALLS];
	int argc[MAX_CALLS];
	int n;
};

static bool read_calls(redisContext *mon, struct calls *c)
{
	redisReply *r;

	while (redisGetReply(mon, (void **)&r) == REDIS_OK) {
		const char *q;
		sds *argv;
		int argc;

		if (r->type != REDIS_REPLY_STATUS) {
			freeReplyObject(r);
			return false;
		}
		if (strstr(r->str, END_MARK)) {
			freeReplyObject(r);
			return true;
		}
		/* '<time> [<db> <client>] "CMD" "arg"...': commands a script ran
		 * come from client "lua" and are not replayed */
		q = strchr(r->str, ']');
		if (!q || strstr(r->str, " lua]")) {
			freeReplyObject(r);
			continue;
		}
		argv = sdssplitargs(q + 1, &argc);
		freeReplyObject(r);
		if (!argv)
			return false;
		if (argc < 5 || strcasecmp(argv[0], "fcall") || c->n == MAX_CALLS) {
			sdsfreesplitres(argv, argc);
			continue;
		}
		c->argv[c->n] = argv;
		c->argc[c->n++] = argc;
	}
	return false;
}

static void calls_free(struct calls *c)
{
	for (int i = 0; i < c->n; i++)
		sdsfreesplitres(c->argv[i], c->argc[i]);
	c->n = 0;
}

/* Call i on rs with its deadline (the last argument) replaced. */
static redisReply *send_with_deadline(const struct redis_srv *rs, const struct calls *c, int i,
				      const char *deadline)
{
	redisContext *rc = redis_client(rs);
	const char *argv[64];
	size_t lens[64];
	redisReply *r;
	int argc = c->argc[i];

	if (!rc || argc > 64) {
		if (rc)
			redisFree(rc);
		return NULL;
	}
	for (int k = 0; k < argc; k++) {
		argv[k] = c->argv[i][k];
		lens[k] = sdslen(c->argv[i][k]);
	}
	argv[argc - 1] = deadline;
	lens[argc - 1] = strlen(deadline);
	r = redisCommandArgv(rc, argc, argv, lens);
	redisFree(rc);
	return r;
}

/* Requests of every kind, a status for each, and who got what. */
static bool workload(const struct dlockd_srv *d)
{
	struct http_resp r = { 0 };
	struct bg waiter;
	char sid[128], path[256];
	bool ok = true;

	/* a plain lock: grant, repeat, re-entry, refusals, renew, release */
	ok &= status_of(d, "PUT", "/locks/lt-p?owner=o1&ttl_ms=60000") == 200;
	ok &= status_of(d, "PUT", "/locks/lt-p?owner=o1&ttl_ms=60000") == 200;
	ok &= http_on(d->base, "PUT", "/locks/lt-p", "{\"owner\":\"o1\",\"reentrant\":true}",
		      &r) == 0 && r.status == 200;
	http_free(&r);
	ok &= status_of(d, "PUT", "/locks/lt-p?owner=o2&ttl_ms=60000") == 409;
	ok &= http_on(d->base, "POST", "/locks/lt-p/heartbeat",
		      "{\"owner\":\"o1\",\"ttl_ms\":60000}", &r) == 0 && r.status == 200;
	http_free(&r);
	ok &= status_of(d, "GET", "/locks/lt-p?owner=o1") == 200;
	ok &= status_of(d, "DELETE", "/locks/lt-p?owner=o2") == 409;
	ok &= status_of(d, "DELETE", "/locks/lt-p?owner=o1") == 200;
	/* a waiter woken by the release */
	bg_start_on(&waiter, d->base, "PUT", "/locks/lt-p?owner=o3&ttl_ms=60000&wait_ms=20000",
		    NULL);
	ok &= wait_waiters(d, 1, 10000);
	ok &= status_of(d, "DELETE", "/locks/lt-p?owner=o1") == 200;
	bg_join(&waiter);
	ok &= waiter.r.status == 200;
	http_free(&waiter.r);
	ok &= status_of(d, "DELETE", "/locks/lt-p?force=true") == 200;

	/* a fair lock: a queued caller that gives up, then is served */
	ok &= status_of(d, "PUT", "/fairlocks/lt-f?owner=o1&ttl_ms=60000") == 200;
	ok &= status_of(d, "PUT", "/fairlocks/lt-f?owner=o2&ttl_ms=60000&wait_ms=200") == 409;
	ok &= status_of(d, "GET", "/fairlocks/lt-f") == 200;
	ok &= status_of(d, "DELETE", "/fairlocks/lt-f?owner=o1") == 200;
	ok &= status_of(d, "PUT", "/fairlocks/lt-f?owner=o2&ttl_ms=60000") == 200;
	ok &= http_on(d->base, "POST", "/fairlocks/lt-f/heartbeat",
		      "{\"owner\":\"o2\",\"ttl_ms\":60000}", &r) == 0 && r.status == 200;
	http_free(&r);
	ok &= status_of(d, "DELETE", "/fairlocks/lt-f?owner=o2") == 200;

	/* a read-write lock: readers, a writer refused, then served */
	ok &= status_of(d, "PUT", "/rwlocks/lt-r/read?owner=o1&ttl_ms=60000") == 200;
	ok &= status_of(d, "PUT", "/rwlocks/lt-r/read?owner=o2&ttl_ms=60000") == 200;
	ok &= status_of(d, "PUT", "/rwlocks/lt-r/write?owner=o3&ttl_ms=60000") == 409;
	ok &= http_on(d->base, "POST", "/rwlocks/lt-r/read/heartbeat",
		      "{\"owner\":\"o1\",\"ttl_ms\":60000}", &r) == 0 && r.status == 200;
	http_free(&r);
	ok &= status_of(d, "DELETE", "/rwlocks/lt-r/read?owner=o1") == 200;
	ok &= status_of(d, "DELETE", "/rwlocks/lt-r/read?owner=o2") == 200;
	ok &= status_of(d, "PUT", "/rwlocks/lt-r/write?owner=o3&ttl_ms=60000") == 200;
	ok &= status_of(d, "PUT", "/rwlocks/lt-r/read?owner=o1&ttl_ms=60000") == 409;
	ok &= status_of(d, "GET", "/rwlocks/lt-r") == 200;
	ok &= status_of(d, "DELETE", "/rwlocks/lt-r/write?owner=o3") == 200;

	/* a semaphore of 2: two permits, a third refused, a limit changed */
	ok &= status_of(d, "PUT", "/semaphores/lt-s?owner=o1&limit=2&ttl_ms=60000") == 200;
	ok &= status_of(d, "PUT", "/semaphores/lt-s?owner=o2&limit=2&ttl_ms=60000") == 200;
	ok &= status_of(d, "PUT", "/semaphores/lt-s?owner=o3&limit=2&ttl_ms=60000") == 409;
	ok &= http_on(d->base, "POST", "/semaphores/lt-s/heartbeat",
		      "{\"owner\":\"o1\",\"ttl_ms\":60000}", &r) == 0 && r.status == 200;
	http_free(&r);
	ok &= status_of(d, "PUT", "/semaphores/lt-s/limit?limit=3") == 200;
	ok &= status_of(d, "GET", "/semaphores/lt-s") == 200;
	ok &= status_of(d, "DELETE", "/semaphores/lt-s?owner=o1") == 200;
	ok &= status_of(d, "DELETE", "/semaphores/lt-s?force=true") == 200;

	/* a session: holdings one by one and all at once, renewed, ended */
	ok &= http_on(d->base, "POST", "/sessions?ttl_ms=60000&name=lt", NULL, &r) == 0 &&
	      r.status == 201 && json_str(&r, "session");
	snprintf(sid, sizeof(sid), "%s", json_str(&r, "session") ? json_str(&r, "session") : "");
	http_free(&r);
	ok &= status_of(d, "PUT", "/locks/lt-sp?session=%s", sid) == 200;
	snprintf(path, sizeof(path), "/sessions/%s/locks", sid);
	ok &= http_on(d->base, "PUT", path,
		      "{\"locks\":[{\"kind\":\"lock\",\"name\":\"lt-sm1\"},"
		      "{\"kind\":\"semaphore\",\"name\":\"lt-sm2\",\"limit\":2},"
		      "{\"kind\":\"write\",\"name\":\"lt-sm3\"}]}", &r) == 0 && r.status == 200;
	http_free(&r);
	ok &= status_of(d, "PUT", "/locks/lt-sm1?owner=o9&ttl_ms=60000") == 409;
	ok &= status_of(d, "POST", "/sessions/%s/heartbeat", sid) == 200;
	ok &= status_of(d, "GET", "/sessions/%s", sid) == 200;
	ok &= status_of(d, "GET", "/sessions") == 200;
	ok &= status_of(d, "GET", "/locks?prefix=lt-") == 200;
	ok &= status_of(d, "DELETE", "/sessions/%s", sid) == 200;
	return ok;
}

/* Every script call of the workload, replayed on a second Redis: first
 * with deadlines that are no number of milliseconds (refused), then with
 * its deadline long past (it must change nothing: no write, no
 * message), then as dlockd sent it (so the next late copy meets the state
 * the workload had there). Both kinds of late answer must occur: the
 * refusal DLOCKD_LATE of a call that would write, and the plain answer of
 * one that only reads. */
TEST(every_script_call_past_its_deadline_changes_nothing)
{
	struct redis_srv rs = { 0 }, rb = { 0 };
	struct dlockd_srv d;
	struct calls *c = calloc(1, sizeof(*c));
	redisContext *mon;
	/* deadlines no clock passes, which a call must refuse rather than
	 * run as never late */
	static const char *const not_deadlines[] = { "nan", "inf", "1e400", "",
						     "99999999999999999999" };
	redisReply *r, *lib;
	int late = 0, answered = 0, wrote = 0;
	char on_time[32];

	CHECK(c, "memory");
	test_at_end(free, c);
	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	CHECK(redis_start(&rb) == 0, "start a second Redis");
	CHECK(lock_hold(&d, "lt-warm", "w", 60000) && lock_release(&d, "lt-warm", "w") == 200,
	      "a first cycle loads dlockd's library");
	lib = rcmd_on(&rs, "FUNCTION LIST WITHCODE");
	CHECK(lib && lib->type == REDIS_REPLY_ARRAY && lib->elements == 1,
	      "Redis has one library, dlockd's");
	for (size_t i = 0; i + 1 < lib->element[0]->elements; i += 2)
		if (!strcmp(lib->element[0]->element[i]->str, "library_code")) {
			const char *code = lib->element[0]->element[i + 1]->str;

			r = rcmd_on(&rb, "FUNCTION LOAD %s", code);
			CHECK(r && r->type == REDIS_REPLY_STRING, "the second Redis loads it");
			freeReplyObject(r);
		}
	freeReplyObject(lib);

	mon = redis_client(&rs);
	CHECK(mon, "a MONITOR connection");
	r = redisCommand(mon, "MONITOR");
	CHECK(r && r->type == REDIS_REPLY_STATUS, "MONITOR");
	freeReplyObject(r);
	CHECK(workload(&d), "the workload's requests were answered as expected");
	freeReplyObject(rcmd_on(&rs, "ECHO %s", END_MARK));
	CHECK(read_calls(mon, c), "the script calls MONITOR saw");
	redisFree(mon);
	CHECK(c->n >= 60, "the workload's script calls (%d)", c->n);

	for (int i = 0; i < c->n; i++) {
		long long before = changes_of(&rb), after;

		for (size_t k = 0; k < sizeof(not_deadlines) / sizeof(not_deadlines[0]); k++) {
			r = send_with_deadline(&rb, c, i, not_deadlines[k]);
			CHECK(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "without its deadline"),
			      "call %d (%s) with the deadline '%s' refused: %s", i, c->argv[i][1],
			      not_deadlines[k], r && r->str ? r->str : "no error");
			freeReplyObject(r);
			CHECK(changes_of(&rb) == before, "call %d (%s) with the deadline '%s' changed "
			      "nothing", i, c->argv[i][1], not_deadlines[k]);
		}
		r = send_with_deadline(&rb, c, i, "1");
		after = changes_of(&rb);
		CHECK(r, "call %d (%s) answered", i, c->argv[i][1]);
		CHECK(after == before, "call %d (%s, key %s) past its deadline changed Redis "
		      "(%lld -> %lld); answered %s", i, c->argv[i][1], c->argv[i][3], before,
		      after, r->type == REDIS_REPLY_ERROR ? r->str : "without an error");
		if (r->type == REDIS_REPLY_ERROR) {
			CHECK(!strncmp(r->str, "DLOCKD_LATE", 11), "call %d (%s) refused: %s", i,
			      c->argv[i][1], r->str);
			late++;
		} else {
			answered++;
		}
		freeReplyObject(r);
		snprintf(on_time, sizeof(on_time), "%lld", redis_time_ms(&rb) + 60000);
		r = send_with_deadline(&rb, c, i, on_time);
		CHECK(r, "call %d replayed", i);
		freeReplyObject(r);
		wrote += changes_of(&rb) != after;
	}
	printf("# %d script calls: %d late copies refused, %d answered (reads); "
	       "%d of the calls on time changed Redis\n", c->n, late, answered, wrote);
	CHECK(late >= wrote && wrote >= 30, "every call that writes was refused late");
	CHECK(answered >= 5, "calls that only read were answered late too");
	calls_free(c);
	redis_stop(&rb, false);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* A refused try of a lock another owner holds (what each waiter woken in
 * vain and each newcomer to a held lock sends) reads the lock and nothing
 * else: no TIME, no write. Counted, not timed. */
TEST(a_refused_try_reads_the_lock_and_no_clock)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	redisReply *r;
	long long total = 0;
	const char *p;

	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd");
	CHECK(lock_hold(&d, "lt-ref", "a", 60000), "a holds the lock");
	CHECK(rcmd_ok_on(&rs, "CONFIG RESETSTAT"), "CONFIG RESETSTAT");
	CHECK(status_of(&d, "PUT", "/locks/lt-ref?owner=b&ttl_ms=60000") == 409, "b is refused");
	CHECK(redis_cmdstat(&rs, "time", "calls") <= 0, "the refusal read no clock");
	r = rcmd_on(&rs, "INFO commandstats");
	CHECK(r && r->type == REDIS_REPLY_STRING, "INFO commandstats");
	/* every command since the reset but the test's own INFO and CONFIG */
	for (p = r->str; (p = strstr(p, "cmdstat_")); p++)
		if (strncmp(p, "cmdstat_info:", 13) && strncmp(p, "cmdstat_config", 14))
			total += strtoll(strstr(p, "calls=") + 6, NULL, 10);
	/* the script call, the lock's PTTL and HGETALL */
	if (total != 3)
		printf("# %s\n", r->str);
	freeReplyObject(r);
	CHECK(total == 3, "a refused try runs 3 commands (got %lld)", total);
	CHECK(lock_release(&d, "lt-ref", "a") == 200, "a releases");
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* The commands a call may run before its deadline check (READS in
 * lua/lib/common.lua) are all reads by Redis' own account: COMMAND INFO
 * flags each one readonly. A write listed there would run late. */
TEST(the_commands_run_before_the_deadline_check_are_redis_readonly_ones)
{
	char src[65536], name[32];
	const char *p, *end;
	int n = 0;

	CHECK(file_read("lua/lib/common.lua", src, sizeof(src)), "read lua/lib/common.lua");
	p = strstr(src, "\nlocal READS = {");
	CHECK(p && (end = strchr(p, '}')), "common.lua has its READS table");
	for (p = strchr(p, '{') + 1; p < end; p++) {
		size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz");
		redisReply *r;
		bool readonly = false;

		if (!len)
			continue;
		CHECK(len < sizeof(name) && !strncmp(p + len, " = true", 7),
		      "READS holds 'name = true' entries: %.40s", p);
		memcpy(name, p, len);
		name[len] = '\0';
		p += len + 7;
		r = rcmd("COMMAND INFO %s", name);
		CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
		      r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements > 2,
		      "COMMAND INFO %s", name);
		for (size_t i = 0; i < r->element[0]->element[2]->elements; i++)
			readonly |= !strcmp(r->element[0]->element[2]->element[i]->str, "readonly");
		freeReplyObject(r);
		CHECK(readonly, "%s runs before the deadline check but is no readonly command", name);
		n++;
	}
	CHECK(n >= 10, "READS lists the scripts' reads (%d)", n);
}
