/* test_sessions.c -- sessions (issue 30) over HTTP against a real Redis:
 * one heartbeat keeps holdings of every kind; when heartbeats stop they
 * end at the session's lease end and a waiter is served then; DELETE
 * releases all and wakes waiters at once; any dlockd instance serves a
 * session and a killed one loses none; an unknown or ended session,
 * another token's session and a full session take nothing. */
#include "../harness/cluster.h"
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How late past a lease end (or a DELETE) a waiter may be served: generous
 * for a loaded machine, far below the waits (20 s) a missed wake-up costs. */
#define LATE_MS 1500

#define TOK_A "tok-sess-a-4c1f9e2b7d"
#define TOK_B "tok-sess-b-8a3d5f1e6c"
#define TOK_ADMIN "tok-sess-admin-2b9c7e4a1f"

/* One of each kind: the resource of name %s and the PUT's extra query. */
static const struct {
	const char *res, *extra;
} kinds[] = {
	{ "/locks/%s", "" },
	{ "/fairlocks/%s", "" },
	{ "/rwlocks/%s/read", "" },
	{ "/rwlocks/%s/write", "" },
	{ "/semaphores/%s", "&limit=1" },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* method path on base, or on H_dlockd when base is NULL. */
static int call(const char *base, const char *method, const char *path, struct http_resp *r)
{
	return base ? http_on(base, method, path, NULL, r) : http(method, path, NULL, r);
}

/* POST /sessions on base (NULL: H_dlockd) with ttl_ms; id gets the
 * session's id ("" when it failed). */
static void session_new(const char *base, int ttl_ms, char id[40])
{
	struct http_resp r;
	char p[80];
	const char *s;

	snprintf(p, sizeof(p), "/sessions?ttl_ms=%d", ttl_ms);
	id[0] = '\0';
	if (call(base, "POST", p, &r) == 0 && r.status == 201 &&
	    (s = json_str(&r, "session")) && strlen(s) == 32)
		snprintf(id, 40, "%s", s);
	http_free(&r);
}

/* Kind i's lock of a test is named <n><i>: one name per kind. */
static void res_of(char *res, size_t len, size_t i, const char *n)
{
	char nm[220];

	snprintf(nm, sizeof(nm), "%s%zu", n, i);
	snprintf(res, len, kinds[i].res, nm);
}

/* Is the resource (kind i, name n) free for another owner right now?
 * Takes and releases it (a read lock: its write side, which a read hold
 * keeps out). */
static bool taken_by_other(const char *base, size_t i, const char *n)
{
	char res[300], p[400];
	long st;
	struct http_resp r;

	res_of(res, sizeof(res), i, n);
	if (kinds[i].res[2] == 'w' && strstr(res, "/read"))
		memcpy(strstr(res, "/read"), "/write", sizeof("/write"));
	snprintf(p, sizeof(p), "%s?owner=other&ttl_ms=5000%s", res, kinds[i].extra);
	call(base, "PUT", p, &r);
	st = r.status;
	http_free(&r);
	if (st == 200) {
		snprintf(p, sizeof(p), "%s?owner=other", res);
		call(base, "DELETE", p, &r);
		http_free(&r);
	}
	return st == 200;
}

/* Take kind i of name n for session id; the status. */
static long take(const char *base, size_t i, const char *n, const char *id)
{
	char res[300], p[400];
	struct http_resp r;
	long st;

	res_of(res, sizeof(res), i, n);
	snprintf(p, sizeof(p), "%s?session=%s%s", res, id, kinds[i].extra);
	call(base, "PUT", p, &r);
	st = r.status;
	http_free(&r);
	return st;
}

static long heartbeat(const char *base, const char *id)
{
	char p[100];
	struct http_resp r;
	long st;

	snprintf(p, sizeof(p), "/sessions/%s/heartbeat", id);
	call(base, "POST", p, &r);
	st = r.status;
	http_free(&r);
	return st;
}

TEST(sessions_heartbeats_keep_every_kind_then_lease_end_serves_a_waiter)
{
	const char *n = lockname("sess-keep");
	char id[40], p[400];
	struct bg w;
	int64_t start, stopped;
	struct http_resp r;

	session_new(NULL, 1000, id);
	CHECK(id[0], "POST /sessions makes a session");
	for (size_t i = 0; i < NKINDS; i++)
		CHECK(take(NULL, i, n, id) == 200, "the session takes %s", kinds[i].res);
	/* 5x its ttl, by session heartbeats alone */
	start = mono_ms();
	while (mono_ms() - start < 5000) {
		CHECK(heartbeat(NULL, id) == 200, "heartbeat");
		sleep_ms(250);
	}
	for (size_t i = 0; i < NKINDS; i++)
		CHECK(!taken_by_other(NULL, i, n), "after 5 s, %s is still the session's",
		      kinds[i].res);
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http("GET", p, NULL, &r) == 0, "GET the session");
	CHECK_STATUS(r, 200, "GET /sessions/{id}");
	CHECK(json_array_size(json_object_get(r.json, "holdings")) == NKINDS,
	      "it lists its %zu holdings: %s", NKINDS, r.body);
	http_free(&r);
	/* heartbeats stop: a waiter for the lock is served at the lease end */
	CHECK(heartbeat(NULL, id) == 200, "last heartbeat");
	stopped = mono_ms();
	snprintf(p, sizeof(p), "/locks/%s0?owner=w&ttl_ms=5000&wait_ms=20000", n);
	bg_start(&w, "PUT", p, NULL);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the waiter is served");
	printf("# waiter served %lld ms after the last heartbeat (session ttl 1000 ms)\n",
	       (long long)(w.done_ms - stopped));
	CHECK(w.done_ms - stopped < 1000 + LATE_MS * slow_factor(),
	      "waiter served %lld ms after the last heartbeat; want < %d",
	      (long long)(w.done_ms - stopped), 1000 + LATE_MS);
	http_free(&w.r);
	CHECK(heartbeat(NULL, id) == 404, "the ended session's heartbeat is 404");
	snprintf(p, sizeof(p), "/sessions/%s/heartbeat", id);
	CHECK(http("POST", p, NULL, &r) == 0, "heartbeat");
	CHECK_ERROR(r, 404, "session_not_found", "heartbeat of an ended session");
	http_free(&r);
	CHECK(metric_value(&H_dlockd, "dlockd_sessions_expired_total") >= 1,
	      "dlockd_sessions_expired_total counts the ended session's heartbeat");
	for (size_t i = 1; i < NKINDS; i++)
		CHECK(taken_by_other(NULL, i, n), "%s ended with the session", kinds[i].res);
}

TEST(sessions_delete_releases_everything_and_wakes_waiters_at_once)
{
	const char *n = lockname("sess-del");
	char id[40], p[400];
	struct bg w;
	int64_t t0;
	struct http_resp r;

	session_new(NULL, 30000, id);
	CHECK(id[0], "POST /sessions");
	for (size_t i = 0; i < NKINDS; i++)
		CHECK(take(NULL, i, n, id) == 200, "the session takes %s", kinds[i].res);
	snprintf(p, sizeof(p), "/rwlocks/%s3/write?owner=w&ttl_ms=5000&wait_ms=20000", n);
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_waiters(NULL, 1, 5000), "a writer waits");
	t0 = mono_ms();
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http("DELETE", p, NULL, &r) == 0, "DELETE");
	CHECK_STATUS(r, 200, "DELETE /sessions/{id}");
	CHECK(json_array_size(json_object_get(r.json, "released")) == NKINDS,
	      "it released its %zu holdings: %s", NKINDS, r.body);
	http_free(&r);
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "the waiting writer is served");
	printf("# waiter served %lld ms after DELETE\n", (long long)(w.done_ms - t0));
	CHECK(w.done_ms - t0 < LATE_MS * slow_factor(), "waiter served %lld ms after DELETE",
	      (long long)(w.done_ms - t0));
	http_free(&w.r);
	for (size_t i = 0; i < NKINDS; i++)
		if (i != 3)	/* the write lock is the waiter's now */
			CHECK(taken_by_other(NULL, i, n), "%s is free", kinds[i].res);
	CHECK(http("DELETE", p, NULL, &r) == 0, "DELETE again");
	CHECK_ERROR(r, 404, "session_not_found", "DELETE of an ended session");
	http_free(&r);
	CHECK(metric_value(&H_dlockd, "dlockd_sessions_ended_total") >= 1,
	      "dlockd_sessions_ended_total counts the DELETE");
	CHECK(metric_value(&H_dlockd, "dlockd_sessions_created_total") >= 1,
	      "dlockd_sessions_created_total counts the POST");
	CHECK(rcmd_int("EXISTS dlockd_session:{%s} dlockd_session:{%s}:holdings", id, id) == 0,
	      "nothing of the session is left in Redis");
}

/* A plain acquire or heartbeat (no session=) with a live session's id as
 * owner would repeat, re-enter or renew the session's holding outside it:
 * a repeat with a longer ttl_ms kept the lock 58 s past the session's
 * end, a re-entry kept it after DELETE /sessions/{id} said it was
 * released (found by a probe, every kind). Both are refused 409
 * not_owner while the session lives, the lease untouched; a release as
 * the session's id still gives a holding back; an owner of the same shape
 * with no session is any owner. */
TEST(sessions_a_plain_call_as_the_sessions_id_never_keeps_a_holding_past_it)
{
	const char *n = lockname("sess-plain");
	char id[40], res[300], p[500], hex[33];
	struct http_resp r;
	int ttl = 1500 * slow_factor();

	session_new(NULL, ttl, id);
	CHECK(id[0], "POST /sessions");
	for (size_t i = 0; i < NKINDS; i++) {
		CHECK(take(NULL, i, n, id) == 200, "the session takes %s", kinds[i].res);
		res_of(res, sizeof(res), i, n);
		snprintf(p, sizeof(p), "%s?owner=%s&ttl_ms=60000%s", res, id, kinds[i].extra);
		CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
		printf("# %s: a plain repeat as the session's id: %ld %.160s\n", kinds[i].res,
		       r.status, r.body);
		CHECK_ERROR(r, 409, "not_owner", "a plain repeat as the session's id");
		http_free(&r);
		if (!kinds[i].extra[0]) {	/* semaphores take no reentrant */
			snprintf(p, sizeof(p), "%s?owner=%s&ttl_ms=60000&reentrant=true", res, id);
			CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
			CHECK_ERROR(r, 409, "not_owner", "a plain re-entry as the session's id");
			http_free(&r);
		}
		snprintf(p, sizeof(p), "%s/heartbeat?owner=%s&ttl_ms=60000", res, id);
		CHECK(http("POST", p, NULL, &r) == 0, "POST");
		CHECK_ERROR(r, 409, "not_owner", "a plain heartbeat as the session's id");
		http_free(&r);
	}
	/* no heartbeat: every holding ends with the session */
	sleep_ms(ttl + LATE_MS * slow_factor());
	for (size_t i = 0; i < NKINDS; i++)
		CHECK(taken_by_other(NULL, i, n), "%s came back at the session's end",
		      kinds[i].res);

	/* a release as the session's id gives one back */
	session_new(NULL, 30000, id);
	CHECK(id[0] && take(NULL, 0, n, id) == 200, "a new session takes %s", kinds[0].res);
	res_of(res, sizeof(res), 0, n);
	snprintf(p, sizeof(p), "%s?owner=%s", res, id);
	CHECK(http("DELETE", p, NULL, &r) == 0, "DELETE");
	CHECK_STATUS(r, 200, "a release as the session's id");
	http_free(&r);
	CHECK(taken_by_other(NULL, 0, n), "%s is free", kinds[0].res);
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http("DELETE", p, NULL, &r) == 0, "DELETE");
	http_free(&r);

	/* 32 hex digits that name no session: an owner like any other */
	memset(hex, 'a', 32);
	hex[32] = '\0';
	snprintf(p, sizeof(p), "%s?owner=%s&ttl_ms=5000", res, hex);
	CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
	CHECK_STATUS(r, 200, "an owner shaped as a session id, with no session");
	http_free(&r);
	snprintf(p, sizeof(p), "%s/heartbeat?owner=%s&ttl_ms=5000", res, hex);
	CHECK(http("POST", p, NULL, &r) == 0, "POST");
	CHECK_STATUS(r, 200, "its heartbeat");
	http_free(&r);
	snprintf(p, sizeof(p), "%s?owner=%s", res, hex);
	CHECK(http("DELETE", p, NULL, &r) == 0, "DELETE");
	CHECK_STATUS(r, 200, "its release");
	http_free(&r);
}

TEST(sessions_any_instance_serves_them_and_a_killed_one_loses_none)
{
	const char *n = lockname("sess-inst");
	char id[40];
	struct dlockd_srv d2;
	int64_t start;

	CHECK(dlockd_start(&d2, NULL, NULL) == 0, "a second dlockd");
	session_new(d2.base, 1000, id);
	CHECK(id[0], "the second dlockd makes the session");
	CHECK(take(d2.base, 0, n, id) == 200, "and takes a lock for it");
	CHECK(take(NULL, 1, n, id) == 200, "the first dlockd takes a fair lock for it");
	dlockd_kill(&d2);
	start = mono_ms();
	while (mono_ms() - start < 3000) {
		CHECK(heartbeat(NULL, id) == 200, "the first dlockd serves the heartbeat");
		sleep_ms(250);
	}
	CHECK(!taken_by_other(NULL, 0, n), "the lock taken through the killed dlockd is kept");
	CHECK(!taken_by_other(NULL, 1, n), "so is the fair lock");
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end it");
}

TEST(sessions_unknown_ended_or_bad_session_takes_nothing)
{
	const char *n = lockname("sess-bad");
	char id[40];
	struct http_resp r;
	char p[300];

	snprintf(p, sizeof(p), "/locks/%s?session=0123456789abcdef0123456789abcdef", n);
	CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
	CHECK_ERROR(r, 404, "session_not_found", "an unknown session");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?session=nothex", n);
	CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
	CHECK_ERROR(r, 400, "invalid_argument", "a malformed session id");
	http_free(&r);
	session_new(NULL, 30000, id);
	CHECK(id[0], "POST /sessions");
	snprintf(p, sizeof(p), "/locks/%s?session=%s&ttl_ms=1000", n, id);
	CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
	CHECK_ERROR(r, 400, "invalid_argument", "session with ttl_ms");
	http_free(&r);
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end it");
	snprintf(p, sizeof(p), "/locks/%s?session=%s", n, id);
	CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
	CHECK_ERROR(r, 404, "session_not_found", "an ended session");
	http_free(&r);
	CHECK(status_of(NULL, "GET", "/sessions/zz") == 404, "a malformed id names no session");
	CHECK(rcmd_int("EXISTS %s", n) == 0, "nothing was taken");
}

/* An acquire for a session may wait: once granted, its lease is the
 * session's (not what was left when the wait began); one whose session
 * ended while it waited takes nothing. */
TEST(sessions_waiting_acquire_ends_with_its_session)
{
	const char *n = lockname("sess-wait");
	char id[40], p[400];
	struct bg w;
	long long lock_pttl, sess_pttl;
	struct http_resp r;

	session_new(NULL, 3000, id);
	CHECK(id[0], "POST /sessions");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=h&ttl_ms=1500", n) == 200, "h holds");
	snprintf(p, sizeof(p), "/locks/%s?session=%s&wait_ms=20000", n, id);
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_waiters(NULL, 1, 5000), "the session's acquire waits");
	while (!w.done_ms) {
		CHECK(heartbeat(NULL, id) == 200, "heartbeat while it waits");
		sleep_ms(200);
	}
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "granted at h's lease end");
	http_free(&w.r);
	lock_pttl = rcmd_int("PTTL %s", n);
	sess_pttl = rcmd_int("PTTL dlockd_session:{%s}", id);
	CHECK(lock_pttl > 0 && lock_pttl <= sess_pttl + 50 && lock_pttl >= sess_pttl - 1000,
	      "the holding's lease (%lld ms) is the session's (%lld ms)", lock_pttl, sess_pttl);
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http("GET", p, NULL, &r) == 0, "GET");
	CHECK(json_array_size(json_object_get(r.json, "holdings")) == 1, "it is the session's: %s",
	      r.body);
	http_free(&r);
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end it");
	CHECK(rcmd_int("EXISTS %s", n) == 0, "the lock went with it");

	/* the session ends (no heartbeat) while its acquire waits */
	session_new(NULL, 500, id);
	CHECK(id[0], "POST /sessions");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=h&ttl_ms=1500", n) == 200, "h holds");
	snprintf(p, sizeof(p), "/locks/%s?session=%s&wait_ms=20000", n, id);
	CHECK(http("PUT", p, NULL, &r) == 0, "PUT");
	CHECK_ERROR(r, 404, "session_not_found", "an acquire whose session ended as it waited");
	http_free(&r);
	/* answered at the session's lease end, while h still holds the lock */
	CHECK(rcmd_int("HEXISTS %s %s", n, id) == 0, "nothing was taken");
}

TEST(sessions_holdings_are_capped)
{
	const char *n = lockname("sess-cap");
	const char *flags[] = { "--max-session-holdings", "2", NULL };
	struct dlockd_srv d;
	struct http_resp r;
	char id[40], p[300];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "dlockd --max-session-holdings 2");
	session_new(d.base, 30000, id);
	CHECK(id[0], "POST /sessions");
	CHECK(take(d.base, 0, n, id) == 200, "first holding");
	CHECK(take(d.base, 1, n, id) == 200, "second holding");
	snprintf(p, sizeof(p), "/semaphores/%s4?session=%s&limit=1", n, id);
	CHECK(call(d.base, "PUT", p, &r) == 0, "PUT");
	CHECK_ERROR(r, 409, "session_full", "a third holding");
	http_free(&r);
	CHECK(taken_by_other(d.base, 4, n), "the semaphore's permit was given back");
	CHECK(take(d.base, 0, n, id) == 200, "a repeat of a holding it has is no new one");
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "end it");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(sessions_per_token_are_capped)
{
	const char *flags[] = { "--max-sessions-per-token", "2", NULL };
	struct dlockd_srv d;
	struct http_resp r;
	char a[40], b[40], c[40];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "dlockd --max-sessions-per-token 2");
	rcmd_int("DEL dlockd_sessions:{dlockd_sessions}:");	/* auth off: token name "" */
	session_new(d.base, 30000, a);
	session_new(d.base, 30000, b);
	CHECK(a[0] && b[0], "two sessions");
	CHECK(call(d.base, "POST", "/sessions?ttl_ms=30000", &r) == 0, "POST");
	CHECK_ERROR(r, 409, "too_many_sessions", "a third session");
	http_free(&r);
	CHECK(status_of(&d, "DELETE", "/sessions/%s", a) == 200, "end one");
	session_new(d.base, 30000, c);
	CHECK(c[0], "then a third may be made");
	CHECK(status_of(&d, "DELETE", "/sessions/%s", b) == 200, "end b");
	CHECK(status_of(&d, "DELETE", "/sessions/%s", c) == 200, "end c");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(sessions_belong_to_the_token_that_made_them)
{
	const char *n = "sessauth-x";
	char file[300], id[40], p[300];
	const char *flags[] = { "--auth-file", file, NULL };
	struct dlockd_srv d;
	struct http_resp r;

	snprintf(file, sizeof(file), "%s/session-tokens", test_tmpdir());
	{
		FILE *f = fopen(file, "w");

		CHECK(f, "write %s", file);
		fputs(TOK_A " client sessauth- team-a\n" TOK_B " client sessauth- team-b\n"
		      TOK_ADMIN " admin * ops\n", f);
		fclose(f);
	}
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --auth-file");
	http_bearer(TOK_A);
	session_new(d.base, 30000, id);
	CHECK(id[0], "team-a makes a session");
	CHECK(take(d.base, 0, n, id) == 200, "team-a takes a lock for it");
	http_bearer(TOK_B);
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(status_of(&d, "GET", "%s", p) == 404, "team-b cannot see it");
	CHECK(status_of(&d, "POST", "%s/heartbeat", p) == 404, "nor renew it");
	CHECK(status_of(&d, "DELETE", "%s", p) == 404, "nor end it");
	snprintf(p, sizeof(p), "/locks/sessauth-y?session=%s", id);
	CHECK(call(d.base, "PUT", p, &r) == 0, "PUT");
	CHECK_ERROR(r, 404, "session_not_found", "team-b taking a lock for team-a's session");
	http_free(&r);
	CHECK(rcmd_int("EXISTS sessauth-y") == 0, "nothing was taken");
	http_bearer(TOK_A);
	CHECK(status_of(&d, "GET", "/sessions/%s", id) == 200, "team-a still has it");
	http_bearer(TOK_ADMIN);
	CHECK(status_of(&d, "GET", "/sessions/%s", id) == 200, "an admin sees it");
	CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "an admin ends it");
	CHECK(rcmd_int("EXISTS %s0", n) == 0, "its lock is released");
	http_bearer(NULL);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* The example of docs/guides/sessions.md, its first ```sh block as it is
 * written, run with sh against the suite's dlockd: every command exits 0,
 * the session held both locks, and they are free once it ended. */
TEST(sessions_guide_example_runs)
{
	char buf[8192];

	CHECK(doc_sh_run("docs/guides/sessions.md",
			 "<!-- run-by: test_sessions.c sessions_guide_example_runs -->", 20000, buf,
			 sizeof(buf)) == 0, "every command of the example succeeds: %s", buf);
	CHECK(strstr(buf, "\"kind\":\"lock\",\"name\":\"guide-report\"") &&
	      strstr(buf, "\"kind\":\"read\",\"name\":\"guide-catalog\""),
	      "the session held both: %s", buf);
	CHECK(strstr(buf, "\"ended\":true"), "and ended: %s", buf);
	CHECK(rcmd_int("EXISTS guide-report guide-catalog") == 0, "both are free");
}

/* On a Redis Cluster, a session holding locks on every shard: one
 * heartbeat keeps them all (3x the ttl), DELETE releases every shard's and
 * wakes a waiter at once. */
TEST(sessions_cluster_holdings_on_every_shard)
{
	static struct redis_cluster c;	/* stopped at the test's end (test_at_end) */
	struct dlockd_srv d;
	char names[3][128], url[300], id[40], p[400];
	struct bg w;
	int64_t start, t0;

	CHECK(cluster_start(&c, 3, 1) == 0, "the cluster starts");
	test_at_end(cluster_stop_at_end, &c);
	snprintf(url, sizeof(url), "redis://%s", c.seeds);
	CHECK(dlockd_start(&d, url, NULL) == 0, "dlockd starts on %s", url);
	CHECK(cluster_names_per_master(&c, "sess", names), "a name on each master");
	session_new(d.base, 1500, id);
	CHECK(id[0], "POST /sessions on the cluster");
	for (int m = 0; m < 3; m++) {
		CHECK(status_of(&d, "PUT", "/locks/%s?session=%s", names[m], id) == 200,
		      "the session takes %s (master %d)", names[m], m);
		CHECK(status_of(&d, "PUT", "/semaphores/%s-s?session=%s&limit=1", names[m], id) ==
		      200, "and a permit of %s-s", names[m]);
	}
	start = mono_ms();
	while (mono_ms() - start < 4500) {
		CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 200, "heartbeat");
		sleep_ms(300);
	}
	for (int m = 0; m < 3; m++)
		CHECK(status_of(&d, "PUT", "/locks/%s?owner=x&ttl_ms=1000", names[m]) == 409,
		      "%s is still the session's after 3x its ttl", names[m]);
	snprintf(p, sizeof(p), "/locks/%s?owner=w&ttl_ms=5000&wait_ms=20000", names[1]);
	bg_start_on(&w, d.base, "PUT", p, NULL);
	CHECK(wait_waiters(&d, 1, 10000), "w waits");
	t0 = mono_ms();
	CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "DELETE the session");
	bg_join(&w);
	CHECK_STATUS(w.r, 200, "w is served");
	CHECK(w.done_ms - t0 < LATE_MS * slow_factor(), "within a moment of the DELETE: %lld ms",
	      (long long)(w.done_ms - t0));
	http_free(&w.r);
	for (int m = 0; m < 3; m++) {
		if (m != 1)
			CHECK(status_of(&d, "PUT", "/locks/%s?owner=x&ttl_ms=1000", names[m]) == 200,
			      "%s is free", names[m]);
		CHECK(status_of(&d, "PUT", "/semaphores/%s-s?owner=x&ttl_ms=1000&limit=1",
				names[m]) == 200, "%s-s is free", names[m]);
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}
