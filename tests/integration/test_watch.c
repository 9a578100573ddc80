/* test_watch.c -- inspecting and watching a lock: GET shows the holders
 * (owner, holds, fencing token, lease), a fair lock's queue in order with
 * each place's deadline, a read-write lock's readers and writer, and with
 * --auth-file hides the owners of other tokens' holdings from a client
 * token; GET ?index=T&wait_ms=N answers as soon as the lock's index
 * differs from T -- taken, released, its lease ran out, a Redisson client
 * let go -- or at wait_ms with the state unchanged, and a stale index at
 * once; a few hundred watchers of one lock are all answered soon after a
 * release, and share one read of the lock per event loop, and the body
 * their answers share is still each asker's own. */
#include "../harness/harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The watches d counts are waiting, and the lock's watch channel is
 * subscribed: a change from now on is seen by its message (or, had the
 * subscription just been confirmed, by the read that follows it). */
static bool watches_parked(const struct dlockd_srv *d, int n, const char *name)
{
	return WAIT_FOR(metric_value(d ? d : &H_dlockd, "dlockd_watches") >= n &&
			channel_subscribers(NULL, "dlockd_lock_state:{%s}", name) >= 1, 5000);
}

/* method path (a printf format); the integer field key of its 200
 * answer, or -1 (printed) when it did not answer 200. */
static long long int_of(const char *method, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static long long int_of(const char *method, const char *key, const char *fmt, ...)
{
	char path[512];
	struct http_resp r;
	long long v = -1;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	if (req(method, path, &r) == 200)
		v = json_int(&r, key);
	else
		printf("# %s %s: %ld %s\n", method, path, r.status, r.body ? r.body : "");
	http_free(&r);
	return v;
}

/* PUT: the grant's fencing token; GET: the state's index. */
#define take(...) int_of("PUT", "fencing_token", __VA_ARGS__)
#define index_of(...) int_of("GET", "index", __VA_ARGS__)

/* Start GET path (a printf format) in the background. */
static void get_bg(struct bg *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void get_bg(struct bg *w, const char *fmt, ...)
{
	char path[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	bg_start(w, "GET", path, NULL);
}

/* holders[i] of a status answer (NULL if none). */
static json_t *holder(const struct http_resp *r, size_t i)
{
	return r->json ? json_array_get(json_object_get(r->json, "holders"), i) : NULL;
}

static const char *field_str(json_t *o, const char *key)
{
	json_t *v = o ? json_object_get(o, key) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static long long field_int(json_t *o, const char *key)
{
	json_t *v = o ? json_object_get(o, key) : NULL;

	return json_is_integer(v) ? json_integer_value(v) : -999999;
}

static size_t holders_n(const struct http_resp *r)
{
	return r->json ? json_array_size(json_object_get(r->json, "holders")) : 0;
}

/* ----- Watching ----- */

TEST(watch_of_a_free_lock_is_answered_when_it_is_taken)
{
	const char *n = lockname("free");
	struct bg w;
	long long token;
	int64_t t;

	get_bg(&w, "/locks/%s?index=0&wait_ms=30000", n);
	CHECK(watches_parked(NULL, 1, n), "the watch waits on the free lock");
	t = mono_ms();
	token = take("/locks/%s?owner=leader-1", n);
	CHECK(token > 0, "leader-1 takes it");
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the watch");
	CHECK(w.done_ms - t < 1000 * slow_factor(), "answered %lld ms after the grant",
	      (long long)(w.done_ms - t));
	CHECK(json_bool(&w.r, "changed") == 1 && json_bool(&w.r, "locked") == 1,
	      "it says the lock changed and is held: %s", w.r.body);
	CHECK(json_int(&w.r, "index") == token, "its index is the holder's fencing token: %s",
	      w.r.body);
	CHECK(field_str(holder(&w.r, 0), "owner") &&
	      !strcmp(field_str(holder(&w.r, 0), "owner"), "leader-1") &&
	      field_int(holder(&w.r, 0), "fencing_token") == token,
	      "and names the holder: %s", w.r.body);
	http_free(&w.r);
	CHECK(lock_release(NULL, n, "leader-1") == 200, "release");
}

TEST(watch_of_a_held_lock_is_answered_when_it_is_released)
{
	const char *n = lockname("held");
	struct bg w;
	long long token;
	int64_t t;

	token = take("/locks/%s?owner=leader-1&ttl_ms=60000", n);
	CHECK(token > 0, "leader-1 holds it for a minute");
	CHECK(index_of("/locks/%s", n) == token, "a status gives the holder's token as index");
	get_bg(&w, "/locks/%s?index=%lld&wait_ms=30000", n, token);
	CHECK(watches_parked(NULL, 1, n), "the watch waits");
	CHECK(lock_release(NULL, n, "leader-1") == 200, "leader-1 lets go");
	t = mono_ms();
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the watch");
	CHECK(w.done_ms - t < 1000 * slow_factor(), "answered %lld ms after the release",
	      (long long)(w.done_ms - t));
	CHECK(json_bool(&w.r, "changed") == 1 && json_bool(&w.r, "locked") == 0 &&
	      json_int(&w.r, "index") == 0 && holders_n(&w.r) == 0,
	      "free now, index 0: %s", w.r.body);
	http_free(&w.r);
}

TEST(watch_sees_a_lease_run_out_without_a_release)
{
	const char *n = lockname("expiry");
	struct bg w;
	long long token;
	int64_t t0;

	t0 = mono_ms();
	token = take("/locks/%s?owner=leader-1&ttl_ms=800", n);
	CHECK(token > 0, "leader-1 holds it for 800 ms, and dies");
	get_bg(&w, "/locks/%s?index=%lld&wait_ms=30000", n, token);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the watch");
	/* the lease's end publishes nothing: the watch looks when it ends */
	CHECK(w.done_ms - t0 >= 750 && w.done_ms - t0 < 800 + 1000 * slow_factor(),
	      "answered %lld ms after an 800 ms grant", (long long)(w.done_ms - t0));
	CHECK(json_bool(&w.r, "changed") == 1 && json_bool(&w.r, "locked") == 0,
	      "the lease ran out: %s", w.r.body);
	http_free(&w.r);
}

TEST(watch_answers_at_wait_ms_with_the_state_unchanged)
{
	const char *n = lockname("timeout");
	struct http_resp r;
	char p[512];
	long long token;
	int64_t t;

	token = take("/locks/%s?owner=leader-1", n);
	CHECK(token > 0, "leader-1 holds it");
	snprintf(p, sizeof(p), "/locks/%s?index=%lld&wait_ms=600", n, token);
	t = mono_ms();
	CHECK(req("GET", p, &r) == 200, "the watch");
	t = mono_ms() - t;
	CHECK(t >= 550 && t < 600 + 1000 * slow_factor(), "answered after %lld ms, want ~600",
	      (long long)t);
	CHECK(json_bool(&r, "changed") == 0 && json_int(&r, "index") == token &&
	      json_bool(&r, "locked") == 1, "unchanged, still the same holder: %s", r.body);
	CHECK(json_int(&r, "ttl_ms") > 0 && json_int(&r, "ttl_ms") <= 30000 - 500,
	      "with the lease left at the answer, not at the start: %s", r.body);
	http_free(&r);

	/* a free lock, too */
	CHECK(lock_release(NULL, n, "leader-1") == 200, "release");
	snprintf(p, sizeof(p), "/locks/%s?index=0&wait_ms=300", n);
	CHECK(req("GET", p, &r) == 200, "watch the free lock");
	CHECK(json_bool(&r, "changed") == 0 && json_int(&r, "index") == 0, "still free: %s",
	      r.body);
	http_free(&r);
}

/* A watch takes a half-close (shutdown(SHUT_WR)) for a hang-up, as an
 * acquire does (TCP cannot tell them apart; docs/reference/http-api.md): it stops watching and
 * the connection is closed without an answer, soon, not at wait_ms; the
 * lock is left as it was. */
TEST(watch_half_closed_is_dropped_without_an_answer)
{
	const char *n = lockname("halfwatch");
	char rq[600], buf[512];
	long long token;
	int64_t t;
	ssize_t got;
	int fd;

	token = take("/locks/%s?owner=leader-1", n);
	CHECK(token > 0, "leader-1 holds it");
	fd = raw_connect(H_dlockd.port);
	CHECK(fd >= 0, "connect");
	snprintf(rq, sizeof(rq), "GET /locks/%s?index=%lld&wait_ms=20000 HTTP/1.1\r\n"
		 "Host: 127.0.0.1\r\n\r\n", n, token);
	CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq), "send the watch");
	CHECK(watches_parked(NULL, 1, n), "it watches");
	t = mono_ms();
	shutdown(fd, SHUT_WR);
	got = read(fd, buf, sizeof(buf));	/* blocks until dlockd closes */
	t = mono_ms() - t;
	close(fd);
	CHECK(got == 0, "closed without an answer (read %zd)", got);
	CHECK(t < 10000, "soon after the half-close, not at wait_ms: %lld ms", (long long)t);
	CHECK(WAIT_FOR(metric_value(&H_dlockd, "dlockd_watches") == 0, 5000), "no watch left");
	CHECK(int_of("GET", "index", "/locks/%s", n) == token, "the lock is untouched");
	CHECK(lock_release(NULL, n, "leader-1") == 200, "release");
}

TEST(watch_with_a_stale_index_is_answered_at_once)
{
	const char *n = lockname("stale");
	struct http_resp r;
	char p[512];
	long long token;
	int64_t t;

	token = take("/locks/%s?owner=leader-2", n);
	CHECK(token > 0, "leader-2 holds it");
	/* the caller last saw leader-1 (an older token), then a free lock */
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "/locks/%s?index=%lld&wait_ms=30000", n,
			 i == 0 ? token - 1 : 0);
		t = mono_ms();
		CHECK(req("GET", p, &r) == 200, "watch with an old index");
		t = mono_ms() - t;
		CHECK(t < 500 * slow_factor(), "answered after %lld ms: at once", (long long)t);
		CHECK(json_bool(&r, "changed") == 1 && json_int(&r, "index") == token,
		      "changed, the index is leader-2's: %s", r.body);
		http_free(&r);
	}
	/* without wait_ms: one read, changed says whether the index moved */
	snprintf(p, sizeof(p), "/locks/%s?index=%lld", n, token);
	CHECK(req("GET", p, &r) == 200, "compare without waiting");
	CHECK(json_bool(&r, "changed") == 0, "the same index: %s", r.body);
	http_free(&r);
	CHECK(lock_release(NULL, n, "leader-2") == 200, "release");
}

TEST(watch_parameters_are_checked)
{
	const char *n = lockname("params");
	struct http_resp r;

	req("GET", "/locks/x?wait_ms=1000", &r);
	CHECK_ERROR(r, 400, "invalid_argument", "wait_ms without index");
	CHECK(strstr(r.body, "index"), "the message says index is needed: %s", r.body);
	http_free(&r);
	req("GET", "/locks/x?index=-1&wait_ms=10", &r);
	CHECK_ERROR(r, 400, "invalid_argument", "a negative index");
	http_free(&r);
	req("GET", "/locks/x?index=9007199254740992", &r);
	CHECK_ERROR(r, 400, "invalid_argument", "an index past 2^53 - 1");
	http_free(&r);
	req("GET", "/rwlocks/x?index=abc", &r);
	CHECK_ERROR(r, 400, "invalid_argument", "an index that is not a number");
	http_free(&r);
	req("GET", "/rwlocks/x?owner=a", &r);
	CHECK_ERROR(r, 400, "invalid_argument", "a read-write status takes no owner");
	http_free(&r);
	/* wait_ms=0 with an index is one read */
	CHECK(status_of(NULL, "GET", "/fairlocks/%s?index=0&wait_ms=0", n) == 200, "wait_ms 0");
}

TEST(watch_of_a_fair_lock_sees_the_hand_off)
{
	const char *n = lockname("fair");
	struct bg w, q;
	char p[512];
	long long token, s0;

	token = take("/fairlocks/%s?owner=job-1", n);
	CHECK(token > 0, "job-1 holds the fair lock");
	s0 = redis_scripts_called();
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=job-2&wait_ms=30000", n);
	bg_start(&q, "PUT", p, NULL);
	CHECK(wait_parked(NULL, 1, s0, 5000, NULL), "job-2 queues");
	get_bg(&w, "/fairlocks/%s?index=%lld&wait_ms=30000", n, token);
	CHECK(watches_parked(NULL, 1, n), "the watch waits");
	/* a fair release speaks only to the queue head's channel: dlockd's
	 * own message wakes the watch */
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=job-1", n) == 200, "job-1 lets go");
	bg_join(&q);
	CHECK_STATUS(q.r, 200, "job-2 is granted");
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the watch");
	CHECK(json_bool(&w.r, "changed") == 1 && json_int(&w.r, "index") != token,
	      "the holder changed: %s", w.r.body);
	http_free(&w.r);
	CHECK(json_int(&q.r, "fencing_token") == index_of("/fairlocks/%s", n),
	      "the index now is job-2's token");
	http_free(&q.r);
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=job-2", n) == 200, "release");
}

TEST(watch_of_a_rwlock_sees_a_new_reader_and_the_writer)
{
	const char *n = lockname("rw");
	struct bg w;
	long long a, b, c, x;

	a = take("/rwlocks/%s/read?owner=a", n);
	b = take("/rwlocks/%s/read?owner=b", n);
	CHECK(a > 0 && b > a, "a and b read");
	CHECK(index_of("/rwlocks/%s", n) == b, "the index of a read lock: its newest reader's");
	get_bg(&w, "/rwlocks/%s?index=%lld&wait_ms=30000", n, b);
	CHECK(watches_parked(NULL, 1, n), "the watch waits");
	c = take("/rwlocks/%s/read?owner=c", n);
	CHECK(c > b, "c reads too");
	bg_join(&w);
	CHECK(w.r.status == 200 && json_bool(&w.r, "changed") == 1 && json_int(&w.r, "index") == c &&
	      json_int(&w.r, "readers") == 3, "a new reader is a change: %s", w.r.body);
	http_free(&w.r);

	/* the newest reader leaving, while others read: its message wakes */
	get_bg(&w, "/rwlocks/%s?index=%lld&wait_ms=30000", n, c);
	CHECK(watches_parked(NULL, 1, n), "the watch waits again");
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?owner=c", n) == 200, "c leaves");
	bg_join(&w);
	CHECK(w.r.status == 200 && json_bool(&w.r, "changed") == 1 && json_int(&w.r, "index") == b,
	      "back to b's index: %s", w.r.body);
	http_free(&w.r);

	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?owner=a", n) == 200, "a leaves");
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?owner=b", n) == 200, "b leaves");
	get_bg(&w, "/rwlocks/%s?index=0&wait_ms=30000", n);
	CHECK(watches_parked(NULL, 1, n), "the watch of the free lock waits");
	x = take("/rwlocks/%s/write?owner=x", n);
	CHECK(x > 0, "x writes");
	bg_join(&w);
	CHECK(w.r.status == 200 && json_int(&w.r, "index") == x && json_str(&w.r, "mode") &&
	      !strcmp(json_str(&w.r, "mode"), "write"), "the writer's index: %s", w.r.body);
	http_free(&w.r);
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/write?owner=x", n) == 200, "x leaves");
}

/* Every kind's scripts tell the watchers themselves (dlockd sends no
 * PUBLISH after them): a holding that starts, and one that ends, answers
 * a watch at once, far sooner than its wait_ms or the lease end. A read
 * release that leaves two readers publishes nothing on Redisson's channel
 * (no waiter may go): only dlockd's state channel tells the watch. */
TEST(watch_of_every_kind_is_told_at_once_of_a_start_and_an_end)
{
	static const struct {
		const char *res, *side, *extra, *others[2];
	} kinds[] = {
		{ "locks", "", "", { NULL, NULL } },
		{ "fairlocks", "", "", { NULL, NULL } },
		{ "rwlocks", "/write", "", { NULL, NULL } },
		{ "rwlocks", "/read", "", { NULL, NULL } },
		{ "rwlocks", "/read", "", { "r1", "r2" } },
		{ "semaphores", "", "&limit=3", { NULL, NULL } },
		{ "semaphores", "", "&limit=3", { "s1", NULL } },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *n = lockname("told"), *res = kinds[i].res;
		const char *side = kinds[i].side, *extra = kinds[i].extra;
		struct bg w;
		long long index;
		int64_t at;

		for (int k = 0; k < 2 && kinds[i].others[k]; k++)
			CHECK(take("/%s/%s%s?owner=%s&ttl_ms=60000%s", res, n, side,
				   kinds[i].others[k], extra) > 0, "%s %s: %s holds", res, side,
			      kinds[i].others[k]);
		for (int end = 0; end < 2; end++) {
			index = index_of("/%s/%s", res, n);
			CHECK(index >= 0, "%s%s: its index", res, side);
			get_bg(&w, "/%s/%s?index=%lld&wait_ms=60000", res, n, index);
			CHECK(watches_parked(NULL, 1, n), "%s%s: the watch waits", res, side);
			at = mono_ms();
			if (!end)
				CHECK(take("/%s/%s%s?owner=x&ttl_ms=60000%s", res, n, side, extra) > 0,
				      "%s%s: x takes it", res, side);
			else
				CHECK(status_of(NULL, "DELETE", "/%s/%s%s?owner=x", res, n, side) == 200,
				      "%s%s: x lets go", res, side);
			CHECK_GRANTED_WITHIN(w, at, 2000, end ? "the watch of the end"
							      : "the watch of the start");
			CHECK(json_bool(&w.r, "changed") == 1 && json_int(&w.r, "index") != index,
			      "%s%s, %s: the index changed: %s", res, side, end ? "end" : "start",
			      w.r.body);
			http_free(&w.r);
		}
		for (int k = 0; k < 2 && kinds[i].others[k]; k++)
			status_of(NULL, "DELETE", "/%s/%s%s?owner=%s", res, n, side,
				  kinds[i].others[k]);
	}
}

/* A Redisson RLock holder dlockd has no token of: index 1. Its unlock
 * publishes on Redisson's channel, which the watch hears too. */
TEST(watch_hears_a_redisson_client_let_go)
{
	const char *n = lockname("redisson");
	const char *field = "8743c9c0-0795-4907-87fd-6c719a6b4586:1";
	char chan[300];
	redisReply *rep;
	struct bg w;
	int64_t t;

	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", n);
	rep = rcmd("EVAL %s 1 %s %s %s", redisson_acquire, n, "60000", field);
	CHECK(rep && rep->type == REDIS_REPLY_NIL, "a Redisson client takes the lock");
	freeReplyObject(rep);
	CHECK(index_of("/locks/%s", n) == 1, "a holding dlockd has no token of has index 1");
	get_bg(&w, "/locks/%s?index=1&wait_ms=30000", n);
	CHECK(watches_parked(NULL, 1, n) &&
	      WAIT_FOR(channel_subscribers(NULL, "%s", chan) >= 1, 5000),
	      "the watch waits on both channels");
	rep = rcmd("EVAL %s 2 %s %s 0 30000 %s publish", redisson_unlock, n, chan, field);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1, "Redisson unlocks");
	freeReplyObject(rep);
	t = mono_ms();
	bg_join(&w);
	/* the lease had a minute left: only Redisson's "0" can have woken it */
	CHECK(w.r.status == 200 && json_bool(&w.r, "changed") == 1 &&
	      w.done_ms - t < 1000 * slow_factor(), "answered %lld ms after the unlock: %s",
	      (long long)(w.done_ms - t), w.r.body);
	http_free(&w.r);
}

TEST(watch_300_watchers_of_one_lock_are_answered_soon_after_a_release)
{
	enum { N = 300 };
	static struct bg w[N];
	const char *n = lockname("many");
	char p[512];
	long long token;
	int64_t t, last = 0;

	token = take("/locks/%s?owner=leader&ttl_ms=120000", n);
	CHECK(token > 0, "the leader holds it");
	snprintf(p, sizeof(p), "/locks/%s?index=%lld&wait_ms=60000", n, token);
	for (int i = 0; i < N; i++)
		bg_start(&w[i], "GET", p, NULL);
	CHECK(watches_parked(NULL, N, n), "%d watches wait", N);
	CHECK(lock_release(NULL, n, "leader") == 200, "the leader lets go");
	t = mono_ms();
	for (int i = 0; i < N; i++) {
		bg_join(&w[i]);
		CHECK(w[i].r.status == 200 && json_bool(&w[i].r, "changed") == 1 &&
		      json_bool(&w[i].r, "locked") == 0, "watch %d: %ld %s", i, w[i].r.status,
		      w[i].r.body ? w[i].r.body : "");
		if (w[i].done_ms - t > last)
			last = w[i].done_ms - t;
		http_free(&w[i].r);
	}
	printf("# %d watchers: the last answered %lld ms after the release\n", N,
	       (long long)last);
	CHECK(last < 2000 * slow_factor(), "the last of %d watches answered %lld ms after the "
	      "release", N, (long long)last);
}

static struct dlockd_srv CD;

static void coalesced_stop(void *arg)
{
	(void)arg;
	dlockd_stop(&CD, 5000);
}

/* One change, 200 watches on a dlockd of two event loops: every watch is
 * answered the new state, and the change costs each loop one read of the
 * lock shared by all of its watches (two at most, should the second of
 * the lock's channels speak while the first read is in flight), not one
 * per watch. */
TEST(watch_200_watchers_of_one_lock_share_their_reads_of_a_change)
{
	enum { N = 200, LOOPS = 2 };
	static const char *const two_loops[] = { "--threads", "2", NULL };
	static struct bg w[N];
	const char *n = lockname("shared");
	char p[512];
	struct http_resp r;
	long long token, s0, reads;

	CHECK(dlockd_start(&CD, NULL, two_loops) == 0, "a dlockd with two event loops");
	test_at_end(coalesced_stop, &CD);
	snprintf(p, sizeof(p), "/locks/%s?owner=leader&ttl_ms=120000", n);
	CHECK(http_on(CD.base, "PUT", p, NULL, &r) == 0 && r.status == 200, "the leader: %s",
	      r.body);
	token = json_int(&r, "fencing_token");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?index=%lld&wait_ms=60000", n, token);
	for (int i = 0; i < N; i++)
		bg_start_on(&w[i], CD.base, "GET", p, NULL);
	CHECK(watches_parked(&CD, N, n), "%d watches wait", N);
	CHECK(redis_scripts_quiet(300), "their first reads are in");
	/* the release script is loaded (EVAL) on its first use: use it once
	 * so that the release below is one EVALSHA */
	CHECK(http_on(CD.base, "DELETE", "/locks/watch-warm?owner=x", NULL, &r) == 0 &&
	      r.status == 409, "a release that loads the release script: %ld", r.status);
	http_free(&r);
	s0 = redis_scripts_called();
	snprintf(p, sizeof(p), "/locks/%s?owner=leader", n);
	CHECK(http_on(CD.base, "DELETE", p, NULL, &r) == 0 && r.status == 200, "released");
	http_free(&r);
	for (int i = 0; i < N; i++) {
		bg_join(&w[i]);
		CHECK(w[i].r.status == 200 && json_bool(&w[i].r, "changed") == 1 &&
		      json_bool(&w[i].r, "locked") == 0, "watch %d: %ld %s", i, w[i].r.status,
		      w[i].r.body ? w[i].r.body : "");
		http_free(&w[i].r);
	}
	reads = redis_scripts_called() - s0 - 1;
	printf("# %lld status reads for one change seen by %d watches on %d loops\n", reads, N,
	       LOOPS);
	CHECK(reads >= 1 && reads <= 2 * LOOPS, "%lld reads for one change seen by %d watches; "
	      "want one per loop (two at most), not one per watch", reads, N);
	test_at_end_cancel(&CD);
	CHECK(dlockd_stop(&CD, 5000) == 0, "dlockd exits cleanly");
}

/* ----- Inspecting ----- */

TEST(inspect_shows_a_fair_queue_in_order_with_deadlines)
{
	enum { Q = 3 };
	const char *n = lockname("queue");
	struct bg q[Q];
	struct http_resp r;
	char p[512];
	long long token, s0;
	json_t *queue;

	token = take("/fairlocks/%s?owner=holder&ttl_ms=60000", n);
	CHECK(token > 0, "holder");
	for (int i = 0; i < Q; i++) {
		s0 = redis_scripts_called();
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=q%d&wait_ms=30000", n, i + 1);
		bg_start(&q[i], "PUT", p, NULL);
		CHECK(wait_parked(NULL, i + 1, s0, 5000, NULL), "q%d queues", i + 1);
	}
	snprintf(p, sizeof(p), "/fairlocks/%s", n);
	CHECK(req("GET", p, &r) == 200, "inspect");
	CHECK(holders_n(&r) == 1 && !strcmp(field_str(holder(&r, 0), "owner"), "holder") &&
	      field_int(holder(&r, 0), "fencing_token") == token &&
	      field_int(holder(&r, 0), "holds") == 1 &&
	      field_int(holder(&r, 0), "ttl_ms") > 50000, "the holder: %s", r.body);
	queue = json_object_get(r.json, "queue");
	CHECK(json_array_size(queue) == Q && json_int(&r, "queue_length") == Q,
	      "three places: %s", r.body);
	for (int i = 0; i < Q; i++) {
		char want[16];
		json_t *place = json_array_get(queue, i);

		snprintf(want, sizeof(want), "q%d", i + 1);
		CHECK(field_str(place, "owner") && !strcmp(field_str(place, "owner"), want),
		      "place %d is %s: %s", i, want, r.body);
		/* a place lives --queue-ttl-ms (5 s) unless refreshed */
		CHECK(field_int(place, "ttl_ms") > 0 && field_int(place, "ttl_ms") <= 5000,
		      "place %d has its deadline ahead: %s", i, r.body);
	}
	http_free(&r);
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "release");
	for (int i = 0; i < Q; i++) {
		bg_join(&q[i]);
		CHECK_STATUS(q[i].r, 200, "served in turn");
		http_free(&q[i].r);
		CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=q%d", n, i + 1) == 200,
		      "q%d releases", i + 1);
	}
}

TEST(inspect_shows_rwlock_readers_and_writer)
{
	const char *n = lockname("sides");
	struct http_resp r;
	char p[512];
	long long r1, r2, w, wr;
	json_t *h;

	r1 = take("/rwlocks/%s/read?owner=r1&ttl_ms=20000", n);
	r2 = take("/rwlocks/%s/read?owner=r2&ttl_ms=40000", n);
	CHECK(take("/rwlocks/%s/read?owner=r2&reentrant=true", n) == r2, "r2 reads twice");
	snprintf(p, sizeof(p), "/rwlocks/%s", n);
	CHECK(req("GET", p, &r) == 200, "inspect");
	CHECK(!strcmp(json_str(&r, "mode"), "read") && json_int(&r, "readers") == 2 &&
	      holders_n(&r) == 2, "two readers: %s", r.body);
	for (size_t i = 0; i < 2; i++) {
		h = holder(&r, i);
		CHECK(!strcmp(field_str(h, "side"), "read"), "a reader: %s", r.body);
		if (!strcmp(field_str(h, "owner"), "r1"))
			CHECK(field_int(h, "holds") == 1 && field_int(h, "fencing_token") == r1 &&
			      field_int(h, "ttl_ms") <= 20000, "r1: %s", r.body);
		else
			CHECK(field_int(h, "holds") == 2 && field_int(h, "fencing_token") == r2 &&
			      field_int(h, "ttl_ms") > 20000, "r2, two holds: %s", r.body);
	}
	http_free(&r);
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?owner=r1", n) == 200, "r1 leaves");
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?owner=r2", n) == 200, "r2 leaves once");
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?owner=r2", n) == 200, "and again");

	/* a writer that also reads: both of its holdings */
	w = take("/rwlocks/%s/write?owner=w", n);
	wr = take("/rwlocks/%s/read?owner=w", n);
	CHECK(w > 0 && wr > w, "w writes, then reads");
	CHECK(req("GET", p, &r) == 200, "inspect");
	CHECK(!strcmp(json_str(&r, "mode"), "write") && json_int(&r, "index") == w &&
	      holders_n(&r) == 2, "written, index the writer's: %s", r.body);
	for (size_t i = 0; i < 2; i++) {
		h = holder(&r, i);
		CHECK(!strcmp(field_str(h, "owner"), "w"), "w's: %s", r.body);
		CHECK(field_int(h, "fencing_token") ==
		      (!strcmp(field_str(h, "side"), "write") ? w : wr), "each side its token: %s",
		      r.body);
	}
	http_free(&r);
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/write?owner=w", n) == 200, "w stops writing");
	CHECK(index_of("/rwlocks/%s", n) == wr, "the downgrade changes the index");
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?owner=w", n) == 200, "w stops reading");
}

#define TOK_A "tok-vis-a-1c9e5d7b2f804a63"
#define TOK_B "tok-vis-b-6a2f0c8e4d1b9573"
#define TOK_ADMIN "tok-vis-admin-0d7c3b9e5a1f2468"

/* GET path with token on d; the answer is handed over. */
static long get_as(const struct dlockd_srv *d, const char *token, const char *path,
		   struct http_resp *r)
{
	http_bearer(token);
	http_on(d->base, "GET", path, NULL, r);
	http_bearer(NULL);
	return r->status;
}

TEST(inspect_with_a_client_token_shows_only_its_own_owners)
{
	char file[300], name[256], fair[256], p[512];
	const char *flags[] = { "--auth-file", file, NULL };
	struct dlockd_srv d;
	struct http_resp r;
	FILE *f;
	long long token;

	snprintf(file, sizeof(file), "%s/vis-tokens", test_tmpdir());
	f = fopen(file, "w");
	CHECK(f, "write the token file");
	fprintf(f, TOK_A " client vis- svc-a\n" TOK_B " client vis- svc-b\n"
		TOK_ADMIN " admin * ops\n");
	fclose(f);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --auth-file");
	snprintf(name, sizeof(name), "vis-%s", lockname("x"));
	snprintf(fair, sizeof(fair), "vis-%s", lockname("q"));

	http_bearer(TOK_A);
	snprintf(p, sizeof(p), "/locks/%s?owner=a1", name);
	CHECK(http_on(d.base, "PUT", p, NULL, &r) == 0 && r.status == 200, "svc-a takes it");
	token = json_int(&r, "fencing_token");
	http_free(&r);
	http_bearer(NULL);

	snprintf(p, sizeof(p), "/locks/%s", name);
	CHECK(get_as(&d, TOK_A, p, &r) == 200 && holders_n(&r) == 1 &&
	      field_str(holder(&r, 0), "owner") && !strcmp(field_str(holder(&r, 0), "owner"), "a1"),
	      "svc-a sees its own owner id: %s", r.body);
	http_free(&r);
	CHECK(get_as(&d, TOK_B, p, &r) == 200 && holders_n(&r) == 1 &&
	      !field_str(holder(&r, 0), "owner") &&
	      field_int(holder(&r, 0), "fencing_token") == token &&
	      field_int(holder(&r, 0), "holds") == 1 && json_int(&r, "index") == token,
	      "svc-b sees the holding, its token and lease, not its owner id: %s", r.body);
	CHECK(!strstr(r.body, "a1"), "nowhere: %s", r.body);
	http_free(&r);
	CHECK(get_as(&d, TOK_ADMIN, p, &r) == 200 &&
	      !strcmp(field_str(holder(&r, 0), "owner"), "a1"), "an admin sees all: %s", r.body);
	http_free(&r);
	CHECK(get_as(&d, TOK_B, "/locks/other-x", &r) == 403, "a name outside the prefix: 403");
	http_free(&r);

	/* a fair queue keeps no token name: its owners are an admin's to see */
	http_bearer(TOK_A);
	snprintf(p, sizeof(p), "/fairlocks/%s?owner=a1", fair);
	CHECK(http_on(d.base, "PUT", p, NULL, &r) == 0 && r.status == 200, "svc-a takes a fair lock");
	http_free(&r);
	http_bearer(NULL);
	rcmd_int("RPUSH redisson_lock_queue:{%s} q-1", fair);
	rcmd_int("ZADD redisson_lock_timeout:{%s} 99999999999999 q-1", fair);
	snprintf(p, sizeof(p), "/fairlocks/%s", fair);
	CHECK(get_as(&d, TOK_A, p, &r) == 200 && json_int(&r, "queue_length") == 1 &&
	      !field_str(json_array_get(json_object_get(r.json, "queue"), 0), "owner") &&
	      field_int(json_array_get(json_object_get(r.json, "queue"), 0), "ttl_ms") > 0,
	      "a client sees the place, not who holds it: %s", r.body);
	http_free(&r);
	CHECK(get_as(&d, TOK_ADMIN, p, &r) == 200 &&
	      !strcmp(field_str(json_array_get(json_object_get(r.json, "queue"), 0), "owner"),
		      "q-1"), "an admin does: %s", r.body);
	http_free(&r);
	rcmd_int("DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", fair, fair);
	CHECK(dlockd_stop(&d, 10000) == 0, "clean exit");
}

/* A client that hangs up during a watch or a waiting acquire is the
 * client's business, not a server fault: the log never says "internal
 * error" for it (libmicrohttpd's words when a handler closes the
 * connection), and with --log-level debug it says what happened. 20 of
 * each, on a dlockd of the test's own so its log holds only them. */
TEST(hang_ups_are_not_logged_as_internal_errors)
{
	const char *const flags[] = { "--log-level", "debug", NULL };
	const char *n = lockname("hangup");
	struct dlockd_srv d;
	enum { N = 20 };
	int fds[2 * N];
	char rq[600];
	long long token;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd");
	CHECK(lock_hold(&d, n, "holder", 60000), "holder takes it");
	{
		char p[300];
		struct http_resp r;

		snprintf(p, sizeof(p), "/locks/%s", n);
		CHECK(http_on(d.base, "GET", p, NULL, &r) == 0 && r.status == 200, "read it");
		token = json_int(&r, "index");
		http_free(&r);
	}
	for (int i = 0; i < 2 * N; i++) {
		fds[i] = raw_connect(d.port);
		CHECK(fds[i] >= 0, "connect");
		if (i < N)
			snprintf(rq, sizeof(rq), "GET /locks/%s?index=%lld&wait_ms=30000 HTTP/1.1\r\n"
				 "Host: 127.0.0.1\r\n\r\n", n, token);
		else
			snprintf(rq, sizeof(rq), "PUT /locks/%s?owner=w%d&wait_ms=30000 HTTP/1.1\r\n"
				 "Host: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", n, i);
		CHECK(write(fds[i], rq, strlen(rq)) == (ssize_t)strlen(rq), "send request %d", i);
	}
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_watches") == N && waiters_of(&d) == N, 10000),
	      "%d watch and %d wait", N, N);
	for (int i = 0; i < 2 * N; i++)
		close(fds[i]);
	CHECK(wait_no_waiters(&d, 10000), "every one is forgotten");
	CHECK(WAIT_FOR(metric_value(&d, "dlockd_watches") == 0, 10000), "no watch left");
	CHECK(lock_release(&d, n, "holder") == 200, "the holder still holds it and releases");
	CHECK(dlockd_stop(&d, 5000) == 0, "dlockd exits cleanly");
	CHECK(file_lines_with(d.log, "internal error", NULL) == 0,
	      "no hang-up is logged as an internal error (%d lines; see %s)",
	      file_lines_with(d.log, "internal error", NULL), d.log);
	CHECK(file_lines_with(d.log, "hung up", NULL) >= 2 * N,
	      "each hang-up is logged at debug as what it is (%d lines; see %s)",
	      file_lines_with(d.log, "hung up", NULL), d.log);
}

/* ----- One body for many watchers ----- */

/* The watches of one change share one read and one rendering of each
 * way of showing it (api/handle_locks.c, struct view_body): who asks,
 * the owner asked about and the index given shape a body, so each must
 * still get its own. */
enum viewer { SVC_A, SVC_B, ADMIN };

static const char *const viewer_token[] = { TOK_A, TOK_B, TOK_ADMIN };

/* What is wrong with an answer about the shared lock, asked by who (with
 * ?owner=b1 if asks_b1) with index given: it shows the lock free or held
 * by b1 (svc-b's) with token t2, b1's owner id to svc-b and the admin
 * only, and says changed exactly when its index is not the one given.
 * NULL when nothing is. */
static const char *shared_answer_wrong(const struct http_resp *r, enum viewer who,
				       bool asks_b1, long long given, long long t2)
{
	long long index = json_int(r, "index");
	json_t *h = holder(r, 0);
	const char *owner = field_str(h, "owner");
	bool held = index == t2;

	if (r->status != 200 || !r->json)
		return "not a 200 status";
	if (json_bool(r, "changed") != (index != given))
		return "changed does not match the index it shows";
	if (index == 0 && (json_bool(r, "locked") != 0 || holders_n(r) != 0))
		return "free, yet held";
	if (index != 0 && !held)
		return "an index neither free nor b1's";
	if (held && (json_bool(r, "locked") != 1 || holders_n(r) != 1 ||
		     field_int(h, "fencing_token") != t2))
		return "b1's holding not shown as it is";
	if (held && (who == SVC_A) != !owner)
		return who == SVC_A ? "b1's owner id shown to another token" :
				      "b1's owner id hidden from whoever may see it";
	if (held && owner && strcmp(owner, "b1"))
		return "another owner id than b1";
	if (asks_b1 && (json_bool(r, "held") != held || json_int(r, "holds") != held))
		return "held and holds of the owner asked about wrong";
	if (!asks_b1 && json_bool(r, "held") != -1)
		return "held, though no owner was asked about";
	return NULL;
}

static struct dlockd_srv SB;

static void shared_body_stop(void *arg)
{
	(void)arg;
	dlockd_stop(&SB, 5000);
}

/* Watchers of one lock on a dlockd of two loops, as three tokens (two
 * clients, an admin), some asking about an owner; some hang up before the
 * change and some as it happens; the lock is released and taken by
 * another token's owner at once (a change while the answers go out), and
 * readers with other indexes read it meanwhile. Every answer is the
 * asker's own: the state it shows, the owner ids its token may see, held
 * for the owner it asked about, changed for the index it gave. */
TEST(watch_answers_shared_by_a_change_are_each_the_askers_own)
{
	enum { PER = 24, WATCHERS = 5 * PER, READERS = 2 * PER, HANG = 10 };
	static struct bg w[WATCHERS], rd[READERS];
	static const struct { enum viewer who; bool asks_b1; } kinds[5] = {
		{ SVC_A, false }, { SVC_B, false }, { ADMIN, false }, { SVC_B, true }, { SVC_A, true },
	};
	char file[300], name[256], p[600], rq[900];
	const char *flags[] = { "--threads", "2", "--auth-file", file, NULL };
	int fds[HANG], saw_b1 = 0;
	struct http_resp r;
	long long t1, t2;
	FILE *f;

	snprintf(file, sizeof(file), "%s/shared-body-tokens", test_tmpdir());
	f = fopen(file, "w");
	CHECK(f, "write the token file");
	fprintf(f, TOK_A " client vis- svc-a\n" TOK_B " client vis- svc-b\n"
		TOK_ADMIN " admin * ops\n");
	fclose(f);
	CHECK(dlockd_start(&SB, NULL, flags) == 0, "a dlockd of two loops with --auth-file");
	test_at_end(shared_body_stop, &SB);
	snprintf(name, sizeof(name), "vis-%s", lockname("shared-body"));

	http_bearer(TOK_A);
	snprintf(p, sizeof(p), "/locks/%s?owner=a1&ttl_ms=60000", name);
	CHECK(http_on(SB.base, "PUT", p, NULL, &r) == 0 && r.status == 200, "svc-a takes it: %s",
	      r.body);
	t1 = json_int(&r, "fencing_token");
	http_free(&r);
	for (int i = 0; i < WATCHERS; i++) {
		http_bearer(viewer_token[kinds[i % 5].who]);
		snprintf(p, sizeof(p), "/locks/%s?index=%lld&wait_ms=60000%s", name, t1,
			 kinds[i % 5].asks_b1 ? "&owner=b1" : "");
		bg_start_on(&w[i], SB.base, "GET", p, NULL);
	}
	http_bearer(NULL);
	for (int i = 0; i < HANG; i++) {
		fds[i] = raw_connect(SB.port);
		CHECK(fds[i] >= 0, "connect");
		snprintf(rq, sizeof(rq), "GET /locks/%s?index=%lld&wait_ms=60000 HTTP/1.1\r\n"
			 "Host: 127.0.0.1\r\nAuthorization: Bearer " TOK_B "\r\n\r\n", name, t1);
		CHECK(write(fds[i], rq, strlen(rq)) == (ssize_t)strlen(rq), "send watch %d", i);
	}
	CHECK(watches_parked(&SB, WATCHERS + HANG, name), "%d watches wait", WATCHERS + HANG);
	for (int i = 0; i < HANG / 2; i++)
		close(fds[i]);
	CHECK(WAIT_FOR(metric_value(&SB, "dlockd_watches") == WATCHERS + HANG - HANG / 2, 5000),
	      "the watches that hung up are gone");

	/* the change, a hang-up as it happens, and another at once */
	http_bearer(TOK_A);
	snprintf(p, sizeof(p), "/locks/%s?owner=a1", name);
	CHECK(http_on(SB.base, "DELETE", p, NULL, &r) == 0 && r.status == 200, "svc-a lets go");
	http_free(&r);
	for (int i = HANG / 2; i < HANG; i++)
		close(fds[i]);
	http_bearer(TOK_B);
	snprintf(p, sizeof(p), "/locks/%s?owner=b1&ttl_ms=60000", name);
	CHECK(http_on(SB.base, "PUT", p, NULL, &r) == 0 && r.status == 200, "svc-b takes it: %s",
	      r.body);
	t2 = json_int(&r, "fencing_token");
	http_free(&r);
	for (int i = 0; i < READERS; i++) {
		snprintf(p, sizeof(p), "/locks/%s?index=%lld", name, i % 2 ? t2 : 0);
		bg_start_on(&rd[i], SB.base, "GET", p, NULL);
	}
	http_bearer(NULL);

	for (int i = 0; i < WATCHERS; i++) {
		const char *wrong;

		bg_join(&w[i]);
		wrong = shared_answer_wrong(&w[i].r, kinds[i % 5].who, kinds[i % 5].asks_b1, t1, t2);
		CHECK(!wrong, "watch %d (%s%s): %s: %ld %s", i, viewer_token[kinds[i % 5].who],
		      kinds[i % 5].asks_b1 ? ", owner=b1" : "", wrong, w[i].r.status,
		      w[i].r.body ? w[i].r.body : "");
		saw_b1 += json_int(&w[i].r, "index") == t2;
		http_free(&w[i].r);
	}
	for (int i = 0; i < READERS; i++) {
		const char *wrong;

		bg_join(&rd[i]);
		wrong = shared_answer_wrong(&rd[i].r, SVC_B, false, i % 2 ? t2 : 0, t2);
		CHECK(!wrong, "reader %d (index %lld): %s: %ld %s", i, i % 2 ? t2 : 0, wrong,
		      rd[i].r.status, rd[i].r.body ? rd[i].r.body : "");
		http_free(&rd[i].r);
	}
	printf("# %d watches answered (%d saw b1's holding, the others the lock free), "
	       "%d readers\n", WATCHERS, saw_b1, READERS);
	CHECK(WAIT_FOR(metric_value(&SB, "dlockd_watches") == 0, 5000), "no watch left");
	test_at_end_cancel(&SB);
	CHECK(dlockd_stop(&SB, 5000) == 0, "dlockd exits cleanly");
}
