/* test_session_heartbeat.c -- what a session's heartbeat costs and what
 * it renews (issue 30): one script per hash slot that holds any of its
 * holdings, on standalone Redis (one for all) and on a Cluster; a holding
 * taken over -- by another owner, or by its own owner anew, with another
 * fencing token -- is reported dropped and not extended. And a session's
 * waiting acquires (its queue places) end with it. */
#include "../harness/cluster.h"
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kinds a session can hold: resource of name %s, the PUT's extra. */
static const struct {
	const char *res, *extra;
} kinds[] = {
	{ "/locks/%s", "" },
	{ "/fairlocks/%s", "" },
	{ "/rwlocks/%s/read", "" },
	{ "/rwlocks/%s/write", "" },
	{ "/semaphores/%s", "&limit=2" },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* Scripts every heartbeat runs besides the holdings' renewals: the
 * session's own (session_read.lua) and its token name's count
 * (session_count.lua). */
#define HB_OWN_SCRIPTS 2

/* POST /sessions?ttl_ms= on d; id gets its id ("" when it failed). */
static void hb_session(const struct dlockd_srv *d, int ttl_ms, char id[40])
{
	if (!session_start_on(d->base, ttl_ms, id))
		id[0] = '\0';
}

/* Kind k of name n, taken on d for session id: the status. */
static long hb_take(const struct dlockd_srv *d, size_t k, const char *n, const char *id)
{
	char res[300];

	snprintf(res, sizeof(res), kinds[k].res, n);
	return status_of(d, "PUT", "%s?session=%s%s", res, id, kinds[k].extra);
}

/* Every command the Redis of rs has run but INFO (INFO commandstats). */
static long long hb_commands(const struct redis_srv *rs)
{
	redisReply *r = rcmd_on(rs, "INFO commandstats");
	long long n = 0;

	for (const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : ""; *p;) {
		const char *line = strstr(p, "cmdstat_"), *calls;

		if (!line)
			break;
		calls = strstr(line, ":calls=");
		p = calls ? calls + 1 : line + 1;
		if (calls && strncmp(line, "cmdstat_info:", 13))
			n += strtoll(calls + 7, NULL, 10);
	}
	if (r)
		freeReplyObject(r);
	return n;
}

/* The session id holds n holdings on d, kinds in turn, each on a name of
 * its own (a read and a write of one rwlock: the write is on the next
 * name). */
static bool hb_hold_n(const struct dlockd_srv *d, const char *id, const char *prefix, int n)
{
	for (int i = 0; i < n; i++) {
		char name[160];

		snprintf(name, sizeof(name), "%s-%d", prefix, i);
		if (hb_take(d, (size_t)i % NKINDS, name, id) != 200)
			return false;
	}
	return true;
}

/* On standalone Redis a heartbeat runs the session's own scripts and one
 * that renews every holding, however many (before: one renewal each, so
 * 2 + n). Prints the cost for the bench note. */
TEST(session_heartbeat_is_one_script_per_32_holdings_on_standalone)
{
	static const int counts[] = { 1, 10, 100 };
	struct redis_srv rs = { 0 };
	struct dlockd_srv d = { 0 };

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "a redis and a dlockd of its own");
	for (size_t t = 0; t < sizeof(counts) / sizeof(counts[0]); t++) {
		int n = counts[t];
		char id[40], prefix[64];
		long long s0, c0, scripts, cmds, pttl;
		int64_t t0, best = INT64_MAX;

		snprintf(prefix, sizeof(prefix), "hb%d", n);
		hb_session(&d, 60000, id);
		CHECK(id[0], "POST /sessions");
		CHECK(hb_hold_n(&d, id, prefix, n), "the session takes %d holdings", n);
		CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 200, "first heartbeat");
		s0 = redis_script_calls(&rs);
		c0 = hb_commands(&rs);
		CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 200, "heartbeat");
		scripts = redis_script_calls(&rs) - s0;
		cmds = hb_commands(&rs) - c0;
		for (int k = 0; k < 5; k++) {
			t0 = mono_ms();
			CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 200, "heartbeat");
			if (mono_ms() - t0 < best)
				best = mono_ms() - t0;
		}
		printf("# heartbeat of %d holdings: %lld scripts, %lld redis commands, %lld ms "
		       "(best of 5)\n", n, scripts, cmds, (long long)best);
		/* one script for every 32 holdings (SESSION_RENEW_CHUNK), so that
		 * none keeps Redis from other clients long */
		CHECK(scripts == HB_OWN_SCRIPTS + (n + 31) / 32,
		      "a heartbeat of %d holdings ran %lld scripts; want %d (one per 32)", n,
		      scripts, HB_OWN_SCRIPTS + (n + 31) / 32);
		pttl = rcmd_int_on(&rs, "PTTL %s-0", prefix);
		CHECK(pttl > 50000, "the holding was renewed to the session's 60 s: PTTL %lld", pttl);
		CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "end it");
	}
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

/* On a Cluster, one script per slot that holds any holding, of at most
 * 16 (each holding's lock is a declared key): 4 names on each of two
 * slots and 20 on a third (one slot a master), taken as four kinds, are
 * four renewals (before: twenty-eight). */
TEST(session_heartbeat_is_one_script_per_slot_on_a_cluster)
{
	static struct redis_cluster c;	/* stopped at the test's end (test_at_end) */
	struct dlockd_srv d;
	char names[3][128], url[300], id[40], first[160] = "";
	long long s0 = 0, s1 = 0;
	int n = 0;

	CHECK(cluster_start(&c, 3, 1) == 0, "the cluster starts");
	test_at_end(cluster_stop_at_end, &c);
	snprintf(url, sizeof(url), "redis://%s", c.seeds);
	CHECK(dlockd_start(&d, url, NULL) == 0, "dlockd starts on %s", url);
	CHECK(cluster_names_per_master(&c, "hbc", names), "a name on each master");
	hb_session(&d, 60000, id);
	CHECK(id[0], "POST /sessions on the cluster");
	for (int m = 0; m < 3; m++)
		for (size_t k = 0; k < (m == 2 ? 20 : 4); k++) {
			char name[160], prefix[32];

			snprintf(prefix, sizeof(prefix), "hbc%d-%zu", m, k);
			cluster_same_slot_name(names[m], prefix, name, sizeof(name));
			CHECK(name[0], "a name on the slot of %s", names[m]);
			/* lock, fair, read, semaphore: the write of a rwlock the
			 * session reads would be on its name */
			CHECK(hb_take(&d, k % 4 == 3 ? 4 : k % 4, name, id) == 200,
			      "the session takes %s", name);
			if (!first[0])
				snprintf(first, sizeof(first), "%s", name);	/* a plain lock */
			n++;
		}
	CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 200, "first heartbeat");
	for (int i = 0; i < c.n; i++)
		s0 += redis_script_calls(&c.node[i]);
	CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 200, "heartbeat");
	for (int i = 0; i < c.n; i++)
		s1 += redis_script_calls(&c.node[i]);
	printf("# cluster heartbeat of %d holdings on 3 slots: %lld scripts\n", n, s1 - s0);
	CHECK(s1 - s0 == HB_OWN_SCRIPTS + 4,
	      "a heartbeat of %d holdings on 3 slots ran %lld scripts; want %d", n, s1 - s0,
	      HB_OWN_SCRIPTS + 4);
	CHECK(status_of(&d, "PUT", "/locks/%s?owner=x&ttl_ms=1000", first) == 409,
	      "%s is still the session's", first);
	CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "end it");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* The lease left of lock n as GET /locks lists it (-1: not listed). */
static long long hb_listed_ttl(const char *n)
{
	struct http_resp r;
	long long ttl = -1;
	char p[300];
	json_t *locks;

	snprintf(p, sizeof(p), "/locks?prefix=%s", n);
	if (http("GET", p, NULL, &r) == 0 && r.status == 200 &&
	    (locks = json_object_get(r.json, "locks")) && json_array_size(locks) == 1)
		ttl = json_integer_value(json_object_get(json_array_get(locks, 0), "ttl_ms"));
	http_free(&r);
	return ttl;
}

/* A holding taken over since the session took it is reported dropped and
 * left as it is: its lease ended (here: forced), then another owner took
 * it, or the session's own owner id took it anew without the session (a
 * new fencing token: before, the owner's new holding was renewed to the
 * session's lease, and kept in the session). */
TEST(session_heartbeat_drops_a_holding_taken_over_and_extends_it_not)
{
	static const size_t taken[] = { 0, 2, 4, 1 };	/* lock, read, semaphore, fair */
	char id[40], p[400], n[4][160];
	struct http_resp r;
	const char *base = lockname("hbo");
	json_t *dropped;

	hb_session(&H_dlockd, 60000, id);
	CHECK(id[0], "POST /sessions");
	for (size_t i = 0; i < 4; i++) {
		snprintf(n[i], sizeof(n[i]), "%s%zu", base, i);
		CHECK(hb_take(&H_dlockd, taken[i], n[i], id) == 200, "the session takes %s", n[i]);
	}
	CHECK(status_of(NULL, "DELETE", "/locks/%s?force=true", n[0]) == 200, "force %s", n[0]);
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s/read?force=true", n[1]) == 200, "force %s",
	      n[1]);
	CHECK(status_of(NULL, "DELETE", "/semaphores/%s?force=true", n[2]) == 200, "force %s",
	      n[2]);
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?force=true", n[3]) == 200, "force %s",
	      n[3]);
	/* the session's owner id holds three anew, without the session (taken
	 * as another owner and made the id's in Redis: the API refuses a plain
	 * PUT as a live session's id, but a failure can leave such a holding) */
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=pre&ttl_ms=3000", n[0]) == 200 &&
	      redis_reown(n[0], "pre", id), "again");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=pre&ttl_ms=3000", n[1]) == 200 &&
	      redis_reown(n[1], "pre", id), "again");
	CHECK(status_of(NULL, "PUT", "/semaphores/%s?owner=pre&ttl_ms=3000&limit=2", n[2]) ==
	      200 && redis_reown(n[2], "pre", id), "again");
	/* and another owner the fourth */
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=other&ttl_ms=3000", n[3]) == 200,
	      "other");
	snprintf(p, sizeof(p), "/sessions/%s/heartbeat", id);
	CHECK(http("POST", p, NULL, &r) == 0, "heartbeat");
	CHECK_STATUS(r, 200, "heartbeat");
	dropped = json_object_get(r.json, "dropped");
	CHECK(json_array_size(dropped) == 4, "all four are dropped: %s", r.body);
	CHECK(json_array_size(json_object_get(r.json, "holdings")) == 0, "none kept: %s", r.body);
	http_free(&r);
	for (size_t i = 0; i < 4; i++) {
		long long ttl = hb_listed_ttl(n[i]);

		CHECK(ttl > 0 && ttl <= 3000, "%s keeps its own lease (%lld ms), not the session's",
		      n[i], ttl);
	}
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http("GET", p, NULL, &r) == 0, "GET");
	CHECK(json_array_size(json_object_get(r.json, "holdings")) == 0,
	      "the session no longer lists them: %s", r.body);
	http_free(&r);
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end it");
	CHECK(hb_listed_ttl(n[0]) > 0, "ending the session left %s alone", n[0]);
}

/* ----- Queue places: a session's waiting acquires end with it ----- */

/* How late past a session's end (or a release) an answer may come:
 * generous for a loaded machine, far below the waits (20 s) it replaces. */
#define LATE_MS 1500

/* The owners queued for fair lock n, head first, as "a,b," into out. */
static void hb_queue(const char *n, char *out, size_t cap)
{
	redisReply *r = rcmd("LRANGE redisson_lock_queue:{%s} 0 -1", n);
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
		len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s,",
					r->element[i]->str);
	if (r)
		freeReplyObject(r);
}

/* A session's acquire that waits for a fair lock behind holder h, with c
 * queued behind it, ends when the session does: by a DELETE sent to
 * another dlockd instance, or at the session's lease end (no heartbeat).
 * It is answered 404 session_not_found at once, its queue place is gone
 * (c is next), and when h releases c is served at once. Before, it waited
 * on: served the lock at h's release, it recorded nothing, released it
 * and answered 404 only then. */
TEST(session_end_answers_its_waiting_acquires_and_frees_their_queue_places)
{
	for (int by_lease = 0; by_lease < 2; by_lease++) {
		const char *n = lockname(by_lease ? "hbq-lease" : "hbq-del");
		struct dlockd_srv d2;
		struct bg a, c;
		char id[40], p[400], q[200];
		int64_t t0, t1;

		CHECK(dlockd_start(&d2, NULL, NULL) == 0, "a second dlockd");
		CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=h&ttl_ms=30000", n) == 200,
		      "h holds %s", n);
		hb_session(&H_dlockd, by_lease ? 1500 : 30000, id);
		CHECK(id[0], "POST /sessions");
		/* the session's acquire waits on the second instance */
		snprintf(p, sizeof(p), "/fairlocks/%s?session=%s&wait_ms=20000", n, id);
		bg_start_on(&a, d2.base, "PUT", p, NULL);
		CHECK(WAIT_FOR((hb_queue(n, q, sizeof(q)), q[0] != '\0'), 5000),
		      "the session's acquire is queued");
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=c&ttl_ms=5000&wait_ms=20000", n);
		bg_start(&c, "PUT", p, NULL);
		CHECK(WAIT_FOR((hb_queue(n, q, sizeof(q)), strchr(q, ',') != strrchr(q, ',')), 5000),
		      "c is queued behind it");
		snprintf(p, sizeof(p), "%s,c,", id);
		CHECK(!strcmp(q, p), "the queue is the session's, then c: %s", q);
		t0 = mono_ms();
		if (!by_lease)
			CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "DELETE it");
		/* with by_lease, no heartbeat: the lease (1.5 s) runs out */
		CHECK(WAIT_FOR(a.done_ms != 0, (by_lease ? 1500 : 0) + LATE_MS),
		      "the session's acquire is answered when it ends");
		bg_join(&a);
		CHECK_ERROR(a.r, 404, "session_not_found", "the waiting acquire of an ended session");
		printf("# %s: the waiting acquire answered %lld ms after %s\n", by_lease ?
		       "lease end" : "DELETE", (long long)(a.done_ms - t0),
		       by_lease ? "the session was made (ttl 1500 ms)" : "the DELETE");
		http_free(&a.r);
		hb_queue(n, q, sizeof(q));
		CHECK(!strcmp(q, "c,"), "its queue place is gone, c is next: %s", q);
		CHECK(c.done_ms == 0, "c still waits for h");
		CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=h", n) == 200, "h releases");
		t1 = mono_ms();
		CHECK_GRANTED_WITHIN(c, t1, LATE_MS, "c, behind the ended session's place");
		http_free(&c.r);
		CHECK(dlockd_stop(&d2, 5000) == 0, "clean exit of the second dlockd");
	}
}

/* The same for a waiting writer of a read-write lock, whose place keeps
 * new readers out, and a semaphore's waiter, whose place is counted: when
 * the session ends, each is answered 404 at once and its place is gone --
 * a new reader is served at once, the semaphore counts nobody waiting. */
TEST(session_end_gives_back_a_waiting_writers_and_permits_place)
{
	const char *n = lockname("hbw"), *s = lockname("hbs");
	struct bg w, p;
	char id[40], path[400];
	int64_t t0;

	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=r1&ttl_ms=30000", n) == 200,
	      "r1 reads %s", n);
	CHECK(status_of(NULL, "PUT", "/semaphores/%s?owner=h&ttl_ms=30000&limit=1", s) == 200,
	      "h takes the one permit of %s", s);
	hb_session(&H_dlockd, 30000, id);
	CHECK(id[0], "POST /sessions");
	snprintf(path, sizeof(path), "/rwlocks/%s/write?session=%s&wait_ms=20000", n, id);
	bg_start(&w, "PUT", path, NULL);
	snprintf(path, sizeof(path), "/semaphores/%s?session=%s&limit=1&wait_ms=20000", s, id);
	bg_start(&p, "PUT", path, NULL);
	CHECK(WAIT_FOR(rcmd_int("ZCARD dlockd_rwlock_writers:{%s}", n) == 1 &&
		       rcmd_int("ZCARD dlockd_sem_waiters:{%s}", s) == 1, 5000),
	      "the session's writer and permit wait, each with its place");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=r2&ttl_ms=30000", n) == 409,
	      "the waiting writer keeps a new reader out");
	t0 = mono_ms();
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "DELETE the session");
	bg_join(&w);
	bg_join(&p);
	CHECK_ERROR(w.r, 404, "session_not_found", "the waiting writer");
	CHECK_ERROR(p.r, 404, "session_not_found", "the waiting permit");
	CHECK(w.done_ms - t0 < LATE_MS * slow_factor() && p.done_ms - t0 < LATE_MS * slow_factor(),
	      "both answered at once: %lld and %lld ms after the DELETE",
	      (long long)(w.done_ms - t0), (long long)(p.done_ms - t0));
	http_free(&w.r);
	http_free(&p.r);
	CHECK(rcmd_int("ZCARD dlockd_rwlock_writers:{%s}", n) == 0, "the writer's place is gone");
	CHECK(rcmd_int("ZCARD dlockd_sem_waiters:{%s}", s) == 0, "the permit's place is gone");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=r2&ttl_ms=30000", n) == 200,
	      "a new reader is served at once");
}

/* A session kept alive by heartbeats keeps its waiting acquire waiting
 * past many of its leases (the watch reads the session at each lease end
 * and finds it renewed), and the acquire is served when the holder lets
 * go. */
TEST(session_kept_by_heartbeats_keeps_its_waiting_acquire)
{
	const char *n = lockname("hbk");
	struct bg a;
	char id[40], p[300];
	int64_t start, t1;

	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=h&ttl_ms=30000", n) == 200, "h holds");
	hb_session(&H_dlockd, 1000, id);
	CHECK(id[0], "POST /sessions");
	snprintf(p, sizeof(p), "/fairlocks/%s?session=%s&wait_ms=20000", n, id);
	bg_start(&a, "PUT", p, NULL);
	/* 4x the session's ttl, kept by heartbeats alone */
	start = mono_ms();
	while (mono_ms() - start < 4000) {
		CHECK(status_of(NULL, "POST", "/sessions/%s/heartbeat", id) == 200, "heartbeat");
		sleep_ms(200);
	}
	CHECK(a.done_ms == 0, "the session's acquire still waits");
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=h", n) == 200, "h releases");
	t1 = mono_ms();
	CHECK_GRANTED_WITHIN(a, t1, LATE_MS, "the session's acquire");
	http_free(&a.r);
	CHECK(rcmd_int("HEXISTS %s %s", n, id) == 1, "the session holds it");
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end it");
	CHECK(rcmd_int("EXISTS %s", n) == 0, "released with the session");
}
