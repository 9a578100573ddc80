/* test_redis_midrun.c -- an operator changes Redis under a running dlockd
 * while clients hold and wait (issue 27's "ACL changes mid-run" and
 * "SCRIPT KILL"): dlockd's user loses EVAL/EVALSHA/FCALL, its channels, its
 * password; another client's script runs past busy-reply-threshold until
 * SCRIPT KILL. Each refused call is a 503 with Redis' reason and changes
 * nothing (the holding is still in Redis), dlockd lives, a waiter keeps
 * waiting and is served at the release once Redis serves again, and a
 * dlockd of another Redis user keeps granting meanwhile. Each test runs
 * its own redis-server and dlockd. Figures: tests/RELIABILITY.md. */
#include "../harness/bystander.h"
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The holds owner has on lock name in Redis (its hash field), 0 if none. */
static long long holds_in_redis(const struct redis_srv *rs, const char *name, const char *owner)
{
	redisReply *rep = rcmd_on(rs, "HGET %s %s", name, owner);
	long long n = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;

	if (rep)
		freeReplyObject(rep);
	return n;
}

/* method path on d: a 503 backend_unavailable whose message has why. */
static bool refused_with(const struct dlockd_srv *d, const char *method, const char *path,
			 const char *why, char *seen, size_t len)
{
	struct http_resp r;
	const char *err, *msg;
	bool ok;

	http_on(d->base, method, path, NULL, &r);
	err = json_str(&r, "error");
	msg = json_str(&r, "message");
	ok = r.status == 503 && err && !strcmp(err, "backend_unavailable") && r.retry_after[0] &&
	     msg && strstr(msg, why);
	snprintf(seen, len, "%s %s: %ld %s", method, path, r.status, r.body ? r.body : "(none)");
	http_free(&r);
	return ok;
}

/* dlockd runs as Redis user "dl"; while X holds a lock and W waits on it,
 * the operator takes away EVAL/EVALSHA/FCALL, then the channels, then the
 * password (and kills dl's connections so that dlockd must log in again).
 * Every release of X meanwhile is a 503 that leaves X holding, every new
 * acquire a 503 that takes nothing; W keeps waiting; a dlockd running as
 * the default user keeps cycling its own lock. Once dl is restored W is
 * served at X's release. */
TEST(redis_acl_changed_mid_run_is_a_503_that_changes_nothing)
{
	static struct bystander other;
	struct redis_srv rs = { 0 };
	struct dlockd_srv d, d2;
	const char *n = lockname("aclmid"), *n2 = lockname("aclnew");
	char url[160], path[160], rel[160], seen[600];
	struct http_resp r;
	struct bg w;
	int64_t t0;

	CHECK(redis_start(&rs) == 0, "start Redis");
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER dl on >pw ~* &* +@all"), "user dl");
	snprintf(url, sizeof(url), "redis://dl:pw@127.0.0.1:%d/0", rs.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start dlockd as dl");
	CHECK(dlockd_start_on(&d2, &rs, NULL) == 0, "start another dlockd as the default user");
	CHECK(bystander_start(&other, d2.base, NULL, 5), "start the other client");

	snprintf(path, sizeof(path), "/locks/%s?owner=x&ttl_ms=120000", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "x holds the lock");
	http_free(&r);
	snprintf(path, sizeof(path), "/locks/%s?owner=w&wait_ms=60000", n);
	bg_start_on(&w, d.base, "PUT", path, NULL);
	CHECK(wait_waiters(&d, 1, 5000), "w waits");
	snprintf(rel, sizeof(rel), "/locks/%s?owner=x", n);
	snprintf(path, sizeof(path), "/locks/%s?owner=y", n2);

	/* 1: no scripts */
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER dl -eval -evalsha -fcall"), "take the scripts away");
	CHECK(refused_with(&d, "DELETE", rel, "NOPERM", seen, sizeof(seen)), "release: %s", seen);
	CHECK(refused_with(&d, "PUT", path, "NOPERM", seen, sizeof(seen)), "acquire: %s", seen);
	CHECK(holds_in_redis(&rs, n, "x") == 1, "x still holds the lock in Redis");
	CHECK(rcmd_int_on(&rs, "EXISTS %s", n2) == 0, "the refused acquire took nothing");
	CHECK(status_of(&d, "GET", "/healthz") == 200, "/healthz answers");
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER dl +eval +evalsha +fcall"), "scripts again");

	/* 2: no channels: Redis drops dl's subscriber, the scripts may not
	 * PUBLISH (the refusal comes before any write) */
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER dl resetchannels"), "take the channels away");
	CHECK(refused_with(&d, "DELETE", rel, "NOPERM", seen, sizeof(seen)), "release: %s", seen);
	CHECK(holds_in_redis(&rs, n, "x") == 1, "x still holds the lock in Redis");
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER dl allchannels"), "channels again");

	/* 3: a new password, dl's connections killed */
	CHECK(rcmd_ok_on(&rs, "ACL SETUSER dl resetpass >other"), "a new password");
	CHECK(rcmd_ok_on(&rs, "CLIENT KILL USER dl"), "dl's connections killed");
	CHECK(WAIT_FOR(refused_with(&d, "DELETE", rel, "", seen, sizeof(seen)), 3000),
	      "release refused while the password is wrong: %s", seen);
	CHECK(refused_with(&d, "PUT", path, "", seen, sizeof(seen)), "acquire: %s", seen);
	CHECK(holds_in_redis(&rs, n, "x") == 1, "x still holds the lock in Redis");
	CHECK(rcmd_int_on(&rs, "EXISTS %s", n2) == 0, "the refused acquire took nothing");
	CHECK(WAIT_FOR(file_contains(d.log, "WRONGPASS"), 5000), "the refused login is logged");
	CHECK(kill(d.pid, 0) == 0, "dlockd is still running");
	CHECK(!w.done_ms, "w still waits: %ld %s", w.r.status, w.r.body ? w.r.body : "");

	CHECK(rcmd_ok_on(&rs, "ACL SETUSER dl resetpass >pw"), "the old password again");
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200 &&
		       channel_subscribers(&rs, "redisson_lock__channel:{%s}", n) >= 1, 15000),
	      "dlockd logs in and subscribes again");
	CHECK(!w.done_ms, "w still waits");
	http_on(d.base, "DELETE", rel, NULL, &r);
	t0 = mono_ms();
	CHECK_STATUS(r, 200, "x releases");
	http_free(&r);
	CHECK_GRANTED_WITHIN(w, t0, 2000, "w is served at the release");
	http_free(&w.r);

	bystander_stop(&other);
	fprintf(stderr, "# the other dlockd meanwhile: %d cycles, %d failed, slowest %.0f ms\n",
		other.cycles, other.failed, other.slowest_ms);
	CHECK(other.cycles > 0 && other.failed == 0, "the other dlockd's client: %d cycles, %d failed",
	      other.cycles, other.failed);
	CHECK(other.slowest_ms < 1000.0 * slow_factor(), "and none slow: %.0f ms", other.slowest_ms);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	CHECK(dlockd_stop(&d2, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}

/* Another client's script loops past busy-reply-threshold while X holds,
 * W waits and other calls come in; then the operator runs SCRIPT KILL.
 * Meanwhile every call is a 503 "busy running a script" that changes
 * nothing, /healthz answers at once, W keeps waiting; afterwards W is
 * served at X's release. */
TEST(redis_script_killed_mid_run_is_a_503_that_changes_nothing)
{
	struct redis_srv rs = { .extra = "--busy-reply-threshold 300" };
	struct dlockd_srv d;
	const char *n = lockname("killmid");
	char path[160], rel[160], puts[5][160], seen[600];
	struct http_resp r;
	struct bg w, more[5];
	redisContext *hog;
	double slowest_health = 0;
	int64_t t0;
	int done = 0;

	CHECK(redis_start(&rs) == 0, "start Redis");
	CHECK(dlockd_start_on(&d, &rs, NULL) == 0, "start dlockd");
	snprintf(path, sizeof(path), "/locks/%s?owner=x&ttl_ms=120000", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "x holds the lock");
	http_free(&r);
	snprintf(path, sizeof(path), "/locks/%s?owner=w&wait_ms=60000", n);
	bg_start_on(&w, d.base, "PUT", path, NULL);
	CHECK(wait_waiters(&d, 1, 5000), "w waits");
	snprintf(rel, sizeof(rel), "/locks/%s?owner=x", n);

	hog = redis_client(&rs);
	CHECK(hog, "connect the hog");
	redisAppendCommand(hog, "EVAL %s 0", "while true do end");
	while (!done)
		CHECK(redisBufferWrite(hog, &done) == REDIS_OK, "send the busy loop");
	/* let Redis start it: a call of dlockd's sent at the same moment may
	 * be served first (Redis serves its clients in no promised order) */
	sleep_ms(100);
	/* calls queued behind the script before Redis starts answering BUSY */
	for (int i = 0; i < 5; i++) {
		snprintf(puts[i], sizeof(puts[i]), "/locks/%s-%d?owner=y&wait_ms=5000", n, i);
		bg_start_on(&more[i], d.base, "PUT", puts[i], NULL);
	}
	CHECK(refused_with(&d, "DELETE", rel, "busy running a script", seen, sizeof(seen)),
	      "release: %s", seen);
	for (int i = 0; i < 20; i++) {
		http_on(d.base, "GET", "/healthz", NULL, &r);
		CHECK_STATUS(r, 200, "/healthz while Redis is busy");
		if (r.ms > slowest_health)
			slowest_health = r.ms;
		http_free(&r);
		sleep_ms(50);
	}
	for (int i = 0; i < 5; i++) {
		bg_join(&more[i]);
		CHECK_ERROR(more[i].r, 503, "backend_unavailable", "an acquire behind the script");
		http_free(&more[i].r);
	}
	CHECK(rcmd_ok_on(&rs, "SCRIPT KILL"), "SCRIPT KILL");
	redisFree(hog);
	/* the script stops at its next check, a moment after SCRIPT KILL
	 * answers: until then Redis still answers BUSY */
	CHECK(WAIT_FOR(rcmd_ok_on(&rs, "PING"), 5000), "Redis answers again");
	CHECK(holds_in_redis(&rs, n, "x") == 1, "x still holds the lock in Redis");
	for (int i = 0; i < 5; i++)
		CHECK(rcmd_int_on(&rs, "EXISTS %s-%d", n, i) == 0, "the refused acquires took nothing");
	CHECK(!w.done_ms, "w still waits: %ld %s", w.r.status, w.r.body ? w.r.body : "");
	CHECK(slowest_health < 500.0 * slow_factor(), "/healthz stayed fast: %.0f ms",
	      slowest_health);
	fprintf(stderr, "# slowest /healthz while Redis was busy: %.1f ms\n", slowest_health);

	/* the subscriber may have been dropped by a BUSY: back within 5 s */
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200 &&
		       channel_subscribers(&rs, "redisson_lock__channel:{%s}", n) >= 1, 15000),
	      "dlockd subscribed again");
	http_on(d.base, "DELETE", rel, NULL, &r);
	t0 = mono_ms();
	CHECK_STATUS(r, 200, "x releases once the script is killed");
	http_free(&r);
	CHECK_GRANTED_WITHIN(w, t0, 2000, "w is served at the release");
	http_free(&w.r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rs, false);
}
