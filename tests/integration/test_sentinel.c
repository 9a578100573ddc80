/* test_sentinel.c -- dlockd on --redis redis-sentinel://: a master, two
 * replicas and three sentinels of the test's own, on free loopback ports.
 * Locks of every kind and a woken waiter work through the sentinel URL;
 * dlockd follows a failover (SENTINEL FAILOVER, and SIGKILL of the master)
 * without a restart, answering only 503 (with Retry-After) in between,
 * never 500 and never hanging; a waiter waiting across the failover is
 * served after it and none is left; fencing tokens keep increasing; with
 * every sentinel down, requests get a 503 that says so and /readyz is not
 * ready. */
#include "../harness/sentinel.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#define MASTER SENTINEL_MASTER

struct topo {
	struct sentinel_topo s;
	struct dlockd_srv d;
};

/* static: test_at_end's argument must outlive the test */
static struct topo T;

static void topo_stop(void *arg)
{
	struct topo *t = arg;

	if (t->d.pid > 0)
		dlockd_stop(&t->d, 10000);
}

/* Master, two replicas synced, sentinels agreed, dlockd on the sentinel
 * URL. */
static int topo_start(struct topo *t)
{
	memset(&t->d, 0, sizeof(t->d));
	/* registered first, run last: dlockd stops before the topology */
	if (sentinel_topo_start(&t->s, 2) < 0)
		return -1;
	test_at_end(topo_stop, t);
	if (dlockd_start(&t->d, t->s.url, NULL) < 0)
		return -1;
	/* /healthz answers before the resolver has found the master (a
	 * request before that is a 503 "no redis master known": seen once
	 * in make test) */
	return WAIT_FOR(status_of(&t->d, "GET", "/readyz") == 200, 10000) ? 0 : -1;
}

TEST(sentinel_locks_of_every_kind_and_a_waiter)
{
	const char *n = lockname("sent"), *f = lockname("sentfair"), *rw = lockname("sentrw");
	const char *w = lockname("sentwait");
	struct http_resp r;
	struct bg b;
	int64_t t0;

	CHECK(topo_start(&T) == 0, "topology and dlockd start");
	CHECK(file_lines_with(T.d.log, "master '" MASTER "' is 127.0.0.1:", NULL) >= 1,
	      "the resolver logs the master it found");

	CHECK(lock_hold(&T.d, n, "a", 30000), "lock through the sentinel URL");
	CHECK(rcmd_int_on(&T.s.data[0], "EXISTS %s", n) == 1, "the lock lives on the master");
	CHECK(lock_release(&T.d, n, "a") == 200, "release");

	CHECK(status_of(&T.d, "PUT", "/fairlocks/%s?owner=a", f) == 200, "fair lock");
	CHECK(status_of(&T.d, "PUT", "/fairlocks/%s?owner=b", f) == 409, "fair lock is held");
	CHECK(status_of(&T.d, "DELETE", "/fairlocks/%s?owner=a", f) == 200, "fair release");

	CHECK(status_of(&T.d, "PUT", "/rwlocks/%s/read?owner=r1", rw) == 200, "reader");
	CHECK(status_of(&T.d, "PUT", "/rwlocks/%s/read?owner=r2", rw) == 200, "second reader");
	CHECK(status_of(&T.d, "PUT", "/rwlocks/%s/write?owner=w", rw) == 409, "writer waits");
	CHECK(status_of(&T.d, "DELETE", "/rwlocks/%s/read?owner=r1", rw) == 200, "reader leaves");
	CHECK(status_of(&T.d, "DELETE", "/rwlocks/%s/read?owner=r2", rw) == 200, "reader leaves");
	CHECK(status_of(&T.d, "PUT", "/rwlocks/%s/write?owner=w", rw) == 200, "writer enters");
	CHECK(status_of(&T.d, "DELETE", "/rwlocks/%s/write?owner=w", rw) == 200, "writer leaves");

	CHECK(lock_hold(&T.d, w, "a", 30000), "holder");
	{
		char p[256];

		snprintf(p, sizeof(p), "/locks/%s?owner=b&wait_ms=30000", w);
		bg_start_on(&b, T.d.base, "PUT", p, NULL);
	}
	CHECK(wait_waiters(&T.d, 1, 10000), "the waiter waits");
	CHECK(WAIT_FOR(channel_subscribers(&T.s.data[0], "redisson_lock__channel:{%s}", w) >= 1,
		       10000), "the subscriber listens on the master");
	CHECK(lock_release(&T.d, w, "a") == 200, "release");
	t0 = mono_ms();
	CHECK_GRANTED_WITHIN(b, t0, 3000, "the waiter is woken by the release");
	http_free(&b.r);
	http_on(T.d.base, "GET", "/readyz", NULL, &r);
	CHECK_STATUS(r, 200, "ready");
	http_free(&r);
}

/* Subscribe to +failover-state-select-slave (the start of a failover) on
 * every sentinel, each a connection in subs; false if one fails. */
static bool watch_failover_start(redisContext *subs[3])
{
	for (int i = 0; i < 3; i++) {
		redisReply *r;

		subs[i] = redis_client(&T.s.sent[i]);
		if (!subs[i])
			return false;
		r = redisCommand(subs[i], "SUBSCRIBE +failover-state-select-slave");
		if (!r)
			return false;
		freeReplyObject(r);
	}
	return true;
}

/* Has one of subs heard the start of a failover of our master? Never
 * blocks. */
static bool heard_failover_start(redisContext *subs[3])
{
	bool heard = false;

	for (int i = 0; i < 3; i++) {
		struct pollfd pf = { .fd = subs[i]->fd, .events = POLLIN };
		void *rep = NULL;

		while (poll(&pf, 1, 0) == 1 && redisBufferRead(subs[i]) == REDIS_OK)
			while (redisGetReplyFromReader(subs[i], &rep) == REDIS_OK && rep) {
				redisReply *r = rep;

				if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
				    r->element[2]->type == REDIS_REPLY_STRING &&
				    !strncmp(r->element[2]->str, "master " MASTER " ", 9))
					heard = true;
				freeReplyObject(r);
				rep = NULL;
			}
	}
	return heard;
}

/* Is the grant of owner on lock name on a master other than old? */
static bool granted_on_new_master(const char *name, const char *owner)
{
	for (int i = 1; i < T.s.ndata; i++) {	/* data[0]: the old master */
		redisReply *r;
		bool master;

		r = rcmd_on(&T.s.data[i], "ROLE");
		master = r && r->type == REDIS_REPLY_ARRAY && r->elements &&
			 r->element[0]->type == REDIS_REPLY_STRING &&
			 !strcmp(r->element[0]->str, "master");
		if (r)
			freeReplyObject(r);
		if (master && rcmd_int_on(&T.s.data[i], "HEXISTS %s %s", name, owner) == 1)
			return true;
	}
	return false;
}

/* The failover of both tests: a holder (a) and a waiter (b) on one lock,
 * then kill the master or ask for a failover, and cycle another lock
 * until dlockd has served from the new master. */
static void failover_run(bool kill)
{
	const char *held = lockname("held"), *cyc = lockname("cyc");
	long long last_token = 0, token_a;
	int old, now_port = 0, n503 = 0, n200_after = 0, n_old = 0, n_old_started = 0, i = 0;
	int64_t t0, switched_ms = 0, first_200_ms = 0, worst_ms = 0, started_ms = 0;
	redisContext *subs[3] = { NULL, NULL, NULL };
	struct redis_srv *nm;
	struct http_resp r;
	char p[256];
	struct bg b;

	CHECK(topo_start(&T) == 0, "topology and dlockd start");
	old = T.s.data[0].port;
	snprintf(p, sizeof(p), "/locks/%s?owner=a&ttl_ms=60000", held);
	http_on(T.d.base, "PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "holder a");
	token_a = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(WAIT_FOR(rcmd_int_on(&T.s.data[1], "EXISTS %s", held) == 1 &&
		       rcmd_int_on(&T.s.data[2], "EXISTS %s", held) == 1, 10000),
	      "the holding reached the replicas");
	snprintf(p, sizeof(p), "/locks/%s?owner=b&ttl_ms=30000&wait_ms=120000", held);
	bg_start_on(&b, T.d.base, "PUT", p, NULL);
	CHECK(wait_waiters(&T.d, 1, 10000), "b waits");
	CHECK(WAIT_FOR(channel_subscribers(&T.s.data[0], "redisson_lock__channel:{%s}", held) >= 1,
		       10000), "the subscriber listens on the master");

	/* the test hears the start of the failover as dlockd does: no grant
	 * may go to the old master once it has begun */
	CHECK(watch_failover_start(subs), "subscribed on every sentinel");
	t0 = mono_ms();
	if (kill) {
		redis_stop(&T.s.data[0], true);
	} else {
		redisReply *rep = rcmd_on(&T.s.sent[1], "SENTINEL FAILOVER " MASTER);

		CHECK(rep && rep->type == REDIS_REPLY_STATUS, "SENTINEL FAILOVER: %s",
		      rep ? rep->str : "no reply");
		freeReplyObject(rep);
	}
	/* cycle a lock (fresh owner each time) until 5 grants on the master
	 * the sentinels named */
	while (n200_after < 5) {
		char owner[32];
		int64_t sent_ms = mono_ms();
		bool after;
		int port;

		CHECK(sent_ms - t0 < 90000 * slow_factor(),
		      "dlockd did not follow the failover within 90 s (%d 503s)", n503);
		if (!started_ms && heard_failover_start(subs))
			started_ms = mono_ms();
		port = sentinel_master_port(&T.s);
		if (port && port != old && !switched_ms)
			switched_ms = mono_ms();
		after = switched_ms != 0;
		snprintf(owner, sizeof(owner), "c%d", i++);
		snprintf(p, sizeof(p), "/locks/%s?owner=%s&ttl_ms=3000&wait_ms=5000", cyc, owner);
		http_on(T.d.base, "PUT", p, NULL, &r);
		if (r.ms > worst_ms)
			worst_ms = (int64_t)r.ms;
		CHECK(r.status == 200 || r.status == 503, "PUT during the failover: %ld %s",
		      r.status, r.body ? r.body : "(none)");
		CHECK(r.ms < 20000, "PUT took %.0f ms", r.ms);
		if (r.status == 503) {
			CHECK(r.retry_after[0], "a 503 without Retry-After");
			n503++;
			http_free(&r);
			sleep_ms(20);	/* pacing, as a client would: not for correctness */
			continue;
		}
		CHECK(json_int(&r, "fencing_token") > last_token,
		      "token %lld after %lld", json_int(&r, "fencing_token"), last_token);
		last_token = json_int(&r, "fencing_token");
		http_free(&r);
		if (started_ms && !granted_on_new_master(cyc, owner))
			n_old_started++;	/* asked after the start: dlockd had left */
		if (after) {
			/* dlockd looks at the sentinels every second: until then
			 * a grant may still go to the old master, which accepts
			 * writes until Sentinel turns it into a replica */
			struct redis_srv *nm_now = sentinel_data_on(&T.s, port);

			if (nm_now && rcmd_int_on(nm_now, "EXISTS %s", cyc) == 1) {
				if (!n200_after) {
					first_200_ms = mono_ms() - t0;
					now_port = port;
				}
				n200_after++;
			} else if (!n200_after) {
				n_old++;
			} else {
				CHECK(false, "a grant on the old master after one on the new");
			}
		}
		snprintf(p, sizeof(p), "/locks/%s?owner=%s", cyc, owner);
		http_on(T.d.base, "DELETE", p, NULL, &r);
		/* 409: a grant the old master took lost in the failover (Redis
		 * replicates asynchronously); its lease is what frees it */
		CHECK(r.status == 200 || r.status == 503 || r.status == 409,
		      "DELETE during the failover: %ld %s", r.status, r.body ? r.body : "");
		if (r.status == 503)
			n503++;
		http_free(&r);
	}
	printf("# %s: failover began %lld ms after the %s, sentinels switched after "
	       "%lld ms; first grant on the new master %lld ms after the %s; %d 503s; %d "
	       "grants on the old master after the start, %d after the switch; slowest "
	       "request %lld ms\n",
	       kill ? "SIGKILL" : "SENTINEL FAILOVER", (long long)(started_ms - t0),
	       kill ? "kill" : "command", (long long)(switched_ms - t0),
	       (long long)first_200_ms, kill ? "kill" : "command", n503, n_old_started,
	       n_old, (long long)worst_ms);
	for (int k = 0; k < 3; k++)
		redisFree(subs[k]);
	CHECK(started_ms, "the test heard +failover-state-select-slave");
	CHECK(n_old_started == 0, "%d grants on the old master after the failover began",
	      n_old_started);
	nm = sentinel_data_on(&T.s, now_port);
	CHECK(nm && nm != &T.s.data[0], "a new master (port %d)", now_port);
	CHECK(lock_hold(&T.d, cyc, "last", 30000), "a lock after the failover");
	CHECK(rcmd_int_on(nm, "EXISTS %s", cyc) == 1, "it lives on the new master");
	CHECK(lock_release(&T.d, cyc, "last") == 200, "release on the new master");

	/* a releases on the new master; b, waiting all along, gets the lock */
	CHECK(lock_release(&T.d, held, "a") == 200, "a releases on the new master");
	t0 = mono_ms();
	CHECK_GRANTED_WITHIN(b, t0, 5000, "b, waiting across the failover, is served");
	CHECK(json_int(&b.r, "fencing_token") > token_a, "b's token %lld after a's %lld",
	      json_int(&b.r, "fencing_token"), token_a);
	http_free(&b.r);
	CHECK(wait_no_waiters(&T.d, 10000), "no waiter left");
	CHECK(WAIT_FOR(status_of(&T.d, "GET", "/readyz") == 200, 20000), "ready again");
}

TEST(sentinel_failover_is_followed)
{
	failover_run(false);
}

TEST(sentinel_master_killed_is_followed)
{
	failover_run(true);
}

TEST(sentinel_all_down_is_503_and_not_ready)
{
	struct http_resp r;
	char url[128];

	memset(&T, 0, sizeof(T));
	test_at_end(topo_stop, &T);
	/* ports nobody listens on */
	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#" MASTER,
		 free_port(), free_port());
	CHECK(dlockd_start(&T.d, url, NULL) == 0, "dlockd starts without any sentinel");
	http_on(T.d.base, "PUT", "/locks/nomaster?owner=a", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "no master known");
	CHECK(strstr(json_str(&r, "message"), "no redis master known"), "message: %s",
	      json_str(&r, "message"));
	CHECK(r.retry_after[0], "Retry-After");
	CHECK(r.ms < 3000, "fails fast: %.0f ms", r.ms);
	http_free(&r);
	http_on(T.d.base, "GET", "/readyz", NULL, &r);
	CHECK_STATUS(r, 503, "not ready");
	http_free(&r);
	CHECK(WAIT_FOR(file_lines_with(T.d.log, "no sentinel of --redis names a master", NULL) >=
		       1, 10000), "the log says why");
}
