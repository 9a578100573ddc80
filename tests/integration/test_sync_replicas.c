/* test_sync_replicas.c -- --redis-sync-replicas: a WAIT after lock changes
 * on a master with a real replica (redis-server --replicaof) on loopback.
 * A grant the replica confirms is on it when the 200 comes; one it cannot
 * confirm (stopped with SIGSTOP) is answered 503 replication_unconfirmed
 * and undone on the master; auto follows ROLE's count; off sends no WAIT. */
#include "../harness/harness.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The replicas the master m lists online in ROLE; -1 on no answer. */
static long long online_replicas(const struct redis_srv *m)
{
	redisContext *c = redis_client(m);
	redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
	long long n = -1;

	if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
	    r->element[2]->type == REDIS_REPLY_ARRAY)
		n = (long long)r->element[2]->elements;
	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	return n;
}

/* How many WAITs m has run (INFO commandstats' cmdstat_wait calls). */
static long long wait_calls(const struct redis_srv *m)
{
	redisContext *c = redis_client(m);
	redisReply *r = c ? redisCommand(c, "INFO commandstats") : NULL;
	const char *at = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_wait:calls=")
							     : NULL;
	long long n = at ? atoll(at + strlen("cmdstat_wait:calls=")) : 0;

	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	return n;
}

/* Start a replica of m and wait until m lists it online. */
static bool start_replica(struct redis_srv *rep, const struct redis_srv *m)
{
	memset(rep, 0, sizeof(*rep));
	snprintf(rep->extra, sizeof(rep->extra), "--replicaof 127.0.0.1 %d", m->port);
	if (redis_start(rep) != 0)
		return false;
	return WAIT_FOR(online_replicas(m) == 1, 10000);
}

/* A test's end: a stopped replica runs again (before it is stopped). */
static void resume_replica(void *arg)
{
	const struct redis_srv *rep = arg;

	if (rep->pid > 0)
		kill(rep->pid, SIGCONT);
}

static bool start_dlockd(struct dlockd_srv *d, const struct redis_srv *m, const char *replicas)
{
	const char *flags[] = { "--redis-sync-replicas", replicas, "--redis-sync-timeout-ms", "1000",
				NULL };

	if (dlockd_start_on(d, m, replicas ? flags : NULL) != 0)
		return false;
	return WAIT_FOR(status_of(d, "GET", "/readyz") == 200, 5000);
}

TEST(sync_replicas_grants_reach_the_replica)
{
	struct redis_srv m = { 0 }, rep;
	struct dlockd_srv d;
	struct http_resp r;
	const char *n = lockname("sync");
	char path[256];

	CHECK(redis_start(&m) == 0, "start the master");
	CHECK(start_replica(&rep, &m), "the replica is online");
	CHECK(start_dlockd(&d, &m, "1"), "dlockd with --redis-sync-replicas 1");

	snprintf(path, sizeof(path), "/locks/%s?owner=a&ttl_ms=30000", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "grant");
	http_free(&r);
	CHECK(rcmd_int_on(&rep, "EXISTS %s", n) == 1, "the replica has the lock at the 200");

	snprintf(path, sizeof(path), "/locks/%s/heartbeat", n);
	http_on(d.base, "POST", path, "{\"owner\":\"a\",\"ttl_ms\":60000}", &r);
	CHECK_STATUS(r, 200, "heartbeat");
	http_free(&r);
	CHECK(rcmd_int_on(&rep, "PTTL %s", n) > 30000, "the replica has the renewed lease");

	snprintf(path, sizeof(path), "/locks/%s?owner=a", n);
	http_on(d.base, "DELETE", path, NULL, &r);
	CHECK_STATUS(r, 200, "release");
	http_free(&r);
	CHECK(rcmd_int_on(&rep, "EXISTS %s", n) == 0, "the replica has the release at the 200");
	CHECK(wait_calls(&m) >= 3, "a WAIT followed each change (%lld)", wait_calls(&m));
	CHECK(metric_value(&d, "dlockd_replication_waits_total") >= 3, "WAITs are counted");
	CHECK(metric_value(&d, "dlockd_replication_unconfirmed_total") == 0, "none unconfirmed");

	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rep, false);
	redis_stop(&m, false);
}

TEST(sync_replicas_unconfirmed_grant_is_undone)
{
	struct redis_srv m = { 0 }, rep;
	struct dlockd_srv d;
	struct http_resp r;
	const char *n = lockname("unconf"), *held = lockname("held");
	char path[256];

	CHECK(redis_start(&m) == 0, "start the master");
	CHECK(start_replica(&rep, &m), "the replica is online");
	CHECK(start_dlockd(&d, &m, "1"), "dlockd with --redis-sync-replicas 1");
	snprintf(path, sizeof(path), "/locks/%s?owner=a&ttl_ms=30000", held);
	CHECK(status_of(&d, "PUT", "%s", path) == 200, "a lock held before the replica stops");

	test_at_end(resume_replica, &rep);
	CHECK(kill(rep.pid, SIGSTOP) == 0, "stop the replica");

	snprintf(path, sizeof(path), "/locks/%s?owner=b&ttl_ms=30000&wait_ms=10000", n);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_ERROR(r, 503, "replication_unconfirmed", "grant no replica confirmed");
	CHECK(atoi(r.retry_after) >= 1, "Retry-After, got '%s'", r.retry_after);
	CHECK(r.ms < 3000.0 * slow_factor(), "answered about the WAIT timeout (%.0f ms)", r.ms);
	CHECK(json_bool(&r, "undone") == 1, "and says it was undone: %s", r.body);
	http_free(&r);
	CHECK(WAIT_FOR(rcmd_int_on(&m, "EXISTS %s", n) == 0, 3000),
	      "the grant was undone on the master");
	CHECK(metric_value(&d, "dlockd_replication_unconfirmed_total") >= 1, "counted");

	/* a repeat added no hold: 503 all the same, and the lock stays held */
	snprintf(path, sizeof(path), "/locks/%s?owner=a&ttl_ms=30000", held);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_ERROR(r, 503, "replication_unconfirmed", "repeat no replica confirmed");
	CHECK(json_bool(&r, "undone") == 1, "its lease was put back: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int_on(&m, "EXISTS %s", held) == 1, "a repeat's 503 releases nothing");

	CHECK(kill(rep.pid, SIGCONT) == 0, "the replica runs again");
	snprintf(path, sizeof(path), "/locks/%s?owner=b&ttl_ms=30000", n);
	CHECK(WAIT_FOR(status_of(&d, "PUT", "%s", path) == 200, 10000),
	      "grants work again once the replica is back");
	CHECK(rcmd_int_on(&rep, "EXISTS %s", n) == 1, "and the replica has it");

	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rep, false);
	redis_stop(&m, false);
}

/* Does the master list no connected replica? */
static bool no_replica(const struct redis_srv *m)
{
	redisReply *x = rcmd_on(m, "INFO replication");
	bool none = x && x->type == REDIS_REPLY_STRING && strstr(x->str, "connected_slaves:0");

	if (x)
		freeReplyObject(x);
	return none;
}

TEST(sync_replicas_auto_follows_role)
{
	struct redis_srv m = { 0 }, rep;
	struct dlockd_srv d;
	struct http_resp r;
	char path[256];

	CHECK(redis_start(&m) == 0, "start the master");
	CHECK(start_dlockd(&d, &m, "auto"), "dlockd with --redis-sync-replicas auto");
	snprintf(path, sizeof(path), "/locks/%s?owner=a", lockname("alone"));
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_STATUS(r, 200, "no replica: confirmed at once");
	http_free(&r);
	CHECK(wait_calls(&m) == 0, "no replica: no WAIT sent");

	CHECK(start_replica(&rep, &m), "a replica comes online");
	test_at_end(resume_replica, &rep);
	/* ROLE is asked again within a second: then the replica is needed */
	CHECK(WAIT_FOR(wait_calls(&m) > 0 ||
		       (status_of(&d, "PUT", "/locks/%s?owner=a", lockname("probe")) == 200 &&
			wait_calls(&m) > 0), 5000), "auto waits for the new replica");
	CHECK(kill(rep.pid, SIGSTOP) == 0, "stop the replica");
	snprintf(path, sizeof(path), "/locks/%s?owner=a", lockname("needed"));
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_ERROR(r, 503, "replication_unconfirmed", "auto with a stopped replica");
	http_free(&r);
	CHECK(kill(rep.pid, SIGCONT) == 0, "the replica runs again");

	/* the replica leaves (promoted, as in a Sentinel failover): the
	 * master, which had one on this connection, lists none now -- and
	 * its grants are not confirmed at once (they would be lost when it is
	 * demoted) */
	CHECK(WAIT_FOR(status_of(&d, "PUT", "/locks/%s?owner=a", lockname("back")) == 200, 10000),
	      "confirmed again with the replica back");
	freeReplyObject(rcmd_on(&rep, "REPLICAOF NO ONE"));	/* it becomes a master */
	CHECK(WAIT_FOR(no_replica(&m), 5000), "the master lists no replica");
	sleep_ms(1100);		/* past auto's once-a-second ROLE */
	snprintf(path, sizeof(path), "/locks/%s?owner=a", lockname("orphan"));
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_ERROR(r, 503, "replication_unconfirmed",
		    "auto on a master whose replicas all left on this connection");
	http_free(&r);

	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rep, false);
	redis_stop(&m, false);
}

TEST(sync_replicas_off_sends_no_wait)
{
	struct redis_srv m = { 0 }, rep;
	struct dlockd_srv d;
	const char *n = lockname("off");
	char path[256];

	CHECK(redis_start(&m) == 0, "start the master");
	CHECK(start_replica(&rep, &m), "the replica is online");
	CHECK(start_dlockd(&d, &m, NULL), "dlockd without --redis-sync-replicas");
	snprintf(path, sizeof(path), "/locks/%s?owner=a", n);
	CHECK(status_of(&d, "PUT", "%s", path) == 200, "grant");
	CHECK(status_of(&d, "DELETE", "%s", path) == 200, "release");
	CHECK(wait_calls(&m) == 0, "off: no WAIT reached redis");
	CHECK(metric_value(&d, "dlockd_replication_waits_total") == 0, "none counted");

	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rep, false);
	redis_stop(&m, false);
}

/* ----- An undo undoes its own change, and nothing a later call did -----
 *
 * A grant no replica confirmed is undone before its 503 goes out. Meanwhile
 * the owner may have retried it (docs/concepts/idempotency.md says to), heartbeated, re-entered
 * or released, through another dlockd or the same one, and been answered 200
 * for that. The undo must then leave the holding as those answers describe
 * it (never free while the owner was told it holds it); a 503 that says
 * "undone" must have left nothing of its change, and one that says it may
 * stand must not have been undone behind the owner's back. */

/* One kind of lock as the HTTP API names it. */
struct sync_kind {
	const char *label;
	const char *path;	/* printf pattern of the acquire/release path */
	const char *beat;	/* ... of the heartbeat */
	const char *field;	/* the owner's field in the lock hash ("%s": owner) */
	const char *rival;	/* the acquire path another client is refused at */
};

static const struct sync_kind sync_kinds[] = {
	{ "lock", "/locks/%s", "/locks/%s/heartbeat", "%s", "/locks/%s" },
	{ "fair lock", "/fairlocks/%s", "/fairlocks/%s/heartbeat", "%s", "/fairlocks/%s" },
	{ "read lock", "/rwlocks/%s/read", "/rwlocks/%s/read/heartbeat", "%s",
	  "/rwlocks/%s/write" },
	{ "write lock", "/rwlocks/%s/write", "/rwlocks/%s/write/heartbeat", "%s:write",
	  "/rwlocks/%s/write" },
};

/* A master, its replica and n dlockd on it, each with --redis-sync-replicas
 * 1 and a one-second WAIT (and --threads 1 with one dlockd: the retry then
 * queues behind the first call's WAIT on the same connection). */
struct sync_set {
	struct redis_srv m, rep;
	struct dlockd_srv d[2];
	int n;
};

/* Does a write on m reach its replica within 200 ms? Not at first: a
 * master that has just sent a new replica its data streams nothing more
 * to it until the replica's first acknowledgement, which comes up to a
 * second later -- a replica stopped before it would catch up late. */
static bool replica_streams(const struct redis_srv *m)
{
	redisContext *c = redis_client(m);
	redisReply *r = c ? redisCommand(c, "SET sync-probe 1") : NULL;
	bool ok;

	if (r)
		freeReplyObject(r);
	r = c ? redisCommand(c, "WAIT 1 200") : NULL;
	ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
	if (r)
		freeReplyObject(r);
	if (c) {
		freeReplyObject(redisCommand(c, "DEL sync-probe"));
		redisFree(c);
	}
	return ok;
}

static bool sync_set_start(struct sync_set *s, int n)
{
	const char *flags[] = { "--redis-sync-replicas", "1", "--redis-sync-timeout-ms", "1000",
				n == 1 ? "--threads" : NULL, "1", NULL };

	memset(s, 0, sizeof(*s));
	s->n = n;
	if (redis_start(&s->m) != 0 || !start_replica(&s->rep, &s->m) ||
	    !WAIT_FOR(replica_streams(&s->m), 5000))
		return false;
	test_at_end(resume_replica, &s->rep);
	for (int i = 0; i < n; i++) {
		if (dlockd_start_on(&s->d[i], &s->m, flags) != 0 ||
		    !WAIT_FOR(status_of(&s->d[i], "GET", "/readyz") == 200, 5000))
			return false;
	}
	return true;
}

/* Stop s; false unless every dlockd exited cleanly (under ASan: nothing
 * leaked either). */
static bool sync_set_stop(struct sync_set *s)
{
	bool clean = true;

	kill(s->rep.pid, SIGCONT);
	for (int i = 0; i < s->n; i++)
		clean &= dlockd_stop(&s->d[i], 5000) == 0;
	redis_stop(&s->rep, false);
	redis_stop(&s->m, false);
	return clean;
}

/* The second dlockd of s, or the only one. */
static const char *sync_other(const struct sync_set *s)
{
	return s->d[s->n - 1].base;
}

/* The owner's hold count in lock hash n (0: none). */
static long long holds_of(const struct sync_set *s, const struct sync_kind *k, const char *n,
			  const char *owner)
{
	char field[128];
	redisReply *r;
	long long v = 0;

	snprintf(field, sizeof(field), k->field, owner);
	r = rcmd_on(&s->m, "HGET %s %s", n, field);
	if (r && r->type == REDIS_REPLY_STRING)
		v = atoll(r->str);
	if (r)
		freeReplyObject(r);
	return v;
}

/* Does another client (owner "rival") find lock n free? It is given no
 * time to wait, and a lock it got is given back. */
static bool rival_gets(const struct sync_set *s, const struct sync_kind *k, const char *n)
{
	char path[256], p[300];
	long st;

	snprintf(path, sizeof(path), k->rival, n);
	snprintf(p, sizeof(p), "%s?owner=rival&ttl_ms=5000", path);
	st = status_of(&s->d[0], "PUT", "%s", p);
	if (st == 200)
		status_of(&s->d[0], "DELETE", "%s?owner=rival", path);
	return st == 200;
}

/* What the owner does while its first call waits for the replica. */
enum between { RETRY, HEARTBEAT, REENTER, RELEASE };

/* The scenario: with the replica stopped, owner "x" calls PUT
 * (grant, or with x holding already a re-entry) on the first dlockd; once
 * Redis ran it, and 0.4 s later (0.3 s on one dlockd), what is between, on
 * the second (or the same); the replica runs again as soon as the first
 * call is answered, so the first call's WAIT has run out and the second
 * one's is confirmed. (The steps wait for each other rather than for
 * fixed times, on a machine that may be slow: the second call must have
 * reached Redis before the first one's undo, the replica be back before
 * the second one's WAIT runs out.) Then the holding must be what the
 * second answer said. */
static void undo_after(enum between what, const struct sync_kind *k, struct sync_set *s)
{
	const char *n = lockname("undo");
	char path[256], p[400], body[128];
	struct bg first, second;
	long long want_holds = 1, scripts;

	snprintf(path, sizeof(path), k->path, n);
	if (what == REENTER || what == RELEASE) {
		struct http_resp r;

		snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=20000", path);
		http_on(s->d[0].base, "PUT", p, NULL, &r);
		CHECK_STATUS(r, 200, "x holds it first");
		http_free(&r);
	}
	CHECK(kill(s->rep.pid, SIGSTOP) == 0, "stop the replica");
	snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=20000%s", path,
		 what == REENTER || what == RELEASE ? "&reentrant=true" : "");
	scripts = redis_script_calls(&s->m);
	bg_start_on(&first, s->d[0].base, "PUT", p, NULL);
	CHECK(WAIT_FOR(redis_script_calls(&s->m) > scripts, 900),
	      "%s: the first call reached redis", k->label);
	scripts = redis_script_calls(&s->m);
	sleep_ms(s->n == 2 ? 400 : 300);
	switch (what) {
	case RETRY:
		snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=20000", path);
		bg_start_on(&second, sync_other(s), "PUT", p, NULL);
		break;
	case HEARTBEAT:
		snprintf(p, sizeof(p), k->beat, n);
		snprintf(body, sizeof(body), "{\"owner\":\"x\",\"ttl_ms\":20000}");
		bg_start_on(&second, sync_other(s), "POST", p, body);
		break;
	case REENTER:
		snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=20000&reentrant=true", path);
		bg_start_on(&second, sync_other(s), "PUT", p, NULL);
		want_holds = 3;
		break;
	case RELEASE:
		snprintf(p, sizeof(p), "%s?owner=x", path);
		bg_start_on(&second, sync_other(s), "DELETE", p, NULL);
		break;
	}
	if (s->n == 2)
		CHECK(WAIT_FOR(redis_script_calls(&s->m) > scripts ||
			       __atomic_load_n(&first.done_ms, __ATOMIC_ACQUIRE), 2000) &&
		      !__atomic_load_n(&first.done_ms, __ATOMIC_ACQUIRE),
		      "%s: the second call reached redis before the first was answered "
		      "(a machine this slow cannot play the scenario)", k->label);
	bg_join(&first);
	CHECK(kill(s->rep.pid, SIGCONT) == 0, "the replica runs again");
	bg_join(&second);
	CHECK_ERROR(first.r, 503, "replication_unconfirmed", "the first call, unconfirmed");
	CHECK_STATUS(second.r, 200, "the second call, confirmed");
	if (what == RELEASE)
		CHECK(json_int(&second.r, "holds") == 1, "%s: the release left one hold (%lld)",
		      k->label, json_int(&second.r, "holds"));
	else if (what != HEARTBEAT)
		CHECK(json_int(&second.r, "holds") == want_holds, "%s: %lld holds, want %lld",
		      k->label, json_int(&second.r, "holds"), want_holds);

	/* x was told it holds the lock: nobody else may get it */
	CHECK(!rival_gets(s, k, n), "%s: another client was granted the lock x was told it "
	      "holds (the first call's undo released x's holding)", k->label);
	CHECK(holds_of(s, k, n, "x") == want_holds, "%s: x has %lld holds in redis, was told %lld",
	      k->label, holds_of(s, k, n, "x"), want_holds);
	CHECK(rcmd_int_on(&s->m, "PTTL %s", n) > 15000, "%s: the lease of the 200 stands (%lld)",
	      k->label, rcmd_int_on(&s->m, "PTTL %s", n));
	/* the undo found the holding changed by a later call: it did nothing,
	 * and the 503 does not claim it did */
	CHECK(json_bool(&first.r, "undone") == 0, "%s: the 503 says undone %d, want false "
	      "(body %s)", k->label, json_bool(&first.r, "undone"), first.r.body);
	http_free(&first.r);
	http_free(&second.r);
	snprintf(p, sizeof(p), "%s?owner=x", path);
	for (long long i = 0; i < want_holds; i++)
		CHECK(status_of(&s->d[0], "DELETE", "%s", p) == 200, "x releases");
	CHECK(rcmd_int_on(&s->m, "EXISTS %s", n) == 0, "%s: free once x released", k->label);
}

TEST(sync_replicas_retry_keeps_the_grant)
{
	struct sync_set s;

	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	for (size_t i = 0; i < sizeof(sync_kinds) / sizeof(sync_kinds[0]) && !test_failed(); i++)
		undo_after(RETRY, &sync_kinds[i], &s);
	CHECK(sync_set_stop(&s), "clean exits");
}

TEST(sync_replicas_retry_on_one_loop_keeps_the_grant)
{
	struct sync_set s;

	CHECK(sync_set_start(&s, 1), "master, replica, one dlockd with one thread");
	undo_after(RETRY, &sync_kinds[0], &s);
	if (!test_failed())
		undo_after(HEARTBEAT, &sync_kinds[0], &s);
	CHECK(sync_set_stop(&s), "clean exits");
}

TEST(sync_replicas_heartbeat_keeps_the_grant)
{
	struct sync_set s;

	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	for (size_t i = 0; i < sizeof(sync_kinds) / sizeof(sync_kinds[0]) && !test_failed(); i++)
		undo_after(HEARTBEAT, &sync_kinds[i], &s);
	CHECK(sync_set_stop(&s), "clean exits");
}

TEST(sync_replicas_reentry_keeps_its_holds)
{
	struct sync_set s;

	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	for (size_t i = 0; i < sizeof(sync_kinds) / sizeof(sync_kinds[0]) && !test_failed(); i++)
		undo_after(REENTER, &sync_kinds[i], &s);
	CHECK(sync_set_stop(&s), "clean exits");
}

TEST(sync_replicas_release_between_keeps_the_rest)
{
	struct sync_set s;

	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	for (size_t i = 0; i < sizeof(sync_kinds) / sizeof(sync_kinds[0]) && !test_failed(); i++)
		undo_after(RELEASE, &sync_kinds[i], &s);
	CHECK(sync_set_stop(&s), "clean exits");
}

/* PUT path?owner=x&ttl_ms=ttl[&reentrant=true] on s's first dlockd with
 * the replica stopped: the 503 it must get, kept in r. */
static bool unconfirmed_put(struct sync_set *s, const char *path, int ttl, bool reentrant,
			    struct http_resp *r)
{
	char p[400];

	snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=%d%s", path, ttl,
		 reentrant ? "&reentrant=true" : "");
	kill(s->rep.pid, SIGSTOP);
	http_on(s->d[0].base, "PUT", p, NULL, r);
	kill(s->rep.pid, SIGCONT);
	if (r->status != 503)
		printf("# PUT %s: status %ld, body %s\n", p, r->status, r->body ? r->body : "");
	return r->status == 503;
}

/* Undone, a grant, repeat or re-entry leaves the lock as it was before it:
 * no holding (nor holders' hash) after a grant, the holds and the lease it
 * had after a repeat or re-entry -- and the 503 says so. */
static void undo_restores(const struct sync_kind *k, struct sync_set *s)
{
	const char *n = lockname("exact");
	char path[256], p[400];
	struct http_resp r;
	long long token;

	snprintf(path, sizeof(path), k->path, n);
	snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=10000", path);
	http_on(s->d[0].base, "PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "x holds it, the replica running");
	token = json_int(&r, "fencing_token");
	http_free(&r);

	CHECK(unconfirmed_put(s, path, 60000, false, &r), "%s: an unconfirmed repeat", k->label);
	CHECK(rcmd_int_on(&s->m, "PTTL %s", n) <= 10000, "%s: the repeat's longer lease was "
	      "undone (pttl %lld, was at most 10000)", k->label, rcmd_int_on(&s->m, "PTTL %s", n));
	CHECK(holds_of(s, k, n, "x") == 1, "%s: one hold", k->label);
	CHECK(json_bool(&r, "undone") == 1, "%s: the repeat's 503 says undone (%s)", k->label,
	      r.body);
	http_free(&r);

	CHECK(unconfirmed_put(s, path, 60000, true, &r), "%s: an unconfirmed re-entry", k->label);
	CHECK(holds_of(s, k, n, "x") == 1, "%s: the re-entry's hold was undone (%lld holds)",
	      k->label, holds_of(s, k, n, "x"));
	CHECK(rcmd_int_on(&s->m, "PTTL %s", n) <= 10000, "%s: and its lease (pttl %lld)",
	      k->label, rcmd_int_on(&s->m, "PTTL %s", n));
	CHECK(json_bool(&r, "undone") == 1, "%s: the re-entry's 503 says undone (%s)", k->label,
	      r.body);
	http_free(&r);

	snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=10000", path);
	CHECK(WAIT_FOR(status_of(&s->d[0], "PUT", "%s", p) == 200, 10000),
	      "%s: confirmed again with the replica back", k->label);
	http_on(s->d[0].base, "PUT", p, NULL, &r);
	CHECK(json_int(&r, "fencing_token") == token && json_int(&r, "holds") == 1,
	      "%s: the same holding (token %lld, was %lld)", k->label,
	      json_int(&r, "fencing_token"), token);
	http_free(&r);
	snprintf(p, sizeof(p), "%s?owner=x", path);
	CHECK(status_of(&s->d[0], "DELETE", "%s", p) == 200, "%s: x releases", k->label);

	CHECK(unconfirmed_put(s, path, 60000, false, &r), "%s: an unconfirmed grant", k->label);
	CHECK(rcmd_int_on(&s->m, "EXISTS %s", n) == 0, "%s: the grant was undone", k->label);
	CHECK(rcmd_int_on(&s->m, "EXISTS dlockd_lock_owners:{%s}", n) == 0,
	      "%s: its holders' hash too", k->label);
	CHECK(json_bool(&r, "undone") == 1, "%s: the grant's 503 says undone (%s)", k->label,
	      r.body);
	http_free(&r);
	CHECK(WAIT_FOR(status_of(&s->d[0], "PUT", "%s?owner=x&ttl_ms=10000", path) == 200, 10000),
	      "%s: granted once the replica is back", k->label);
	CHECK(status_of(&s->d[0], "DELETE", "%s?owner=x", path) == 200, "%s: released", k->label);
}

TEST(sync_replicas_undo_restores_exactly)
{
	struct sync_set s;

	CHECK(sync_set_start(&s, 1), "master, replica, one dlockd");
	for (size_t i = 0; i < sizeof(sync_kinds) / sizeof(sync_kinds[0]) && !test_failed(); i++)
		undo_restores(&sync_kinds[i], &s);
	CHECK(sync_set_stop(&s), "clean exits");
}

/* A test's end: a stopped master runs again. */
static void resume_master(void *arg)
{
	const struct redis_srv *m = arg;

	if (m->pid > 0)
		kill(m->pid, SIGCONT);
}

/* Redis unreachable when the undo is due. The WAIT's connection is cut
 * (its WAIT gets no answer: unconfirmed) and the master stopped for 0.7 s:
 * the undo is tried again and done (undone, the lock free). The master
 * stopped while the WAIT waits, for good: dlockd gives up on the WAIT
 * after 10 s, and its undo cannot run either -- the 503 says the grant may
 * stand, and it does once the master runs again: a 503 that may have
 * taken effect is not called undone. */
TEST(sync_replicas_undo_with_redis_unreachable)
{
	struct sync_set s;
	const char *n = lockname("cut"), *n2 = lockname("away");
	char p[256];
	struct bg first;

	CHECK(sync_set_start(&s, 1), "master, replica, one dlockd");
	test_at_end(resume_master, &s.m);

	CHECK(kill(s.rep.pid, SIGSTOP) == 0, "stop the replica");
	snprintf(p, sizeof(p), "/locks/%s?owner=x&ttl_ms=20000", n);
	bg_start_on(&first, s.d[0].base, "PUT", p, NULL);
	/* granted, and so answered: the master wrote the answer before it
	 * served another client */
	CHECK(WAIT_FOR(rcmd_int_on(&s.m, "EXISTS %s", n) == 1, 2000), "granted in redis");
	sleep_ms(100);	/* the WAIT is sent */
	CHECK(rcmd_int_on(&s.m, "CLIENT KILL TYPE normal SKIPME yes") >= 1, "cut dlockd's "
	      "connection while its WAIT waits");
	CHECK(kill(s.m.pid, SIGSTOP) == 0, "stop the master");
	sleep_ms(700);
	CHECK(kill(s.m.pid, SIGCONT) == 0, "the master runs again");
	bg_join(&first);
	CHECK_ERROR(first.r, 503, "replication_unconfirmed", "a grant whose WAIT was cut");
	CHECK(json_bool(&first.r, "undone") == 1, "the undo was tried again once redis was "
	      "back: undone (body %s)", first.r.body);
	CHECK(rcmd_int_on(&s.m, "EXISTS %s", n) == 0, "and the lock is free");
	http_free(&first.r);

	snprintf(p, sizeof(p), "/locks/%s?owner=x&ttl_ms=30000", n2);
	bg_start_on(&first, s.d[0].base, "PUT", p, NULL);
	CHECK(WAIT_FOR(rcmd_int_on(&s.m, "EXISTS %s", n2) == 1, 2000), "granted in redis");
	sleep_ms(100);	/* the WAIT is sent */
	CHECK(kill(s.m.pid, SIGSTOP) == 0, "stop the master while the WAIT waits");
	bg_join(&first);
	CHECK(kill(s.m.pid, SIGCONT) == 0, "the master runs again");
	CHECK_ERROR(first.r, 503, "replication_unconfirmed", "a grant whose undo cannot run");
	/* what the 503 claims must be so: the grant stands on the master */
	CHECK(json_bool(&first.r, "undone") == 0 || rcmd_int_on(&s.m, "EXISTS %s", n2) == 0,
	      "the 503 claims the grant was undone, but x holds the lock in redis (body %s)",
	      first.r.body);
	CHECK(json_bool(&first.r, "undone") == 0, "the 503 says the grant may stand (body %s)",
	      first.r.body);
	CHECK(!rival_gets(&s, &sync_kinds[0], n2), "nobody else gets it meanwhile");
	http_free(&first.r);
	CHECK(kill(s.rep.pid, SIGCONT) == 0, "the replica runs again");
	/* a retry tells x the truth: the grant stands, and is confirmed now */
	CHECK(WAIT_FOR(status_of(&s.d[0], "PUT", "%s", p) == 200, 10000),
	      "x's retry is granted (the same holding)");
	CHECK(status_of(&s.d[0], "DELETE", "/locks/%s?owner=x", n2) == 200, "x releases");
	CHECK(sync_set_stop(&s), "clean exits");
}

/* A read-write lock whose writer also reads: each side is a holding of its
 * own, and an undo of one leaves the other as its own answers said. An
 * unconfirmed read repeat or re-entry is taken back without shortening
 * the write lease a heartbeat of the writer gave meanwhile; an unconfirmed
 * upgrade (the only reader taking the write side) leaves it a reader. */
TEST(sync_replicas_undo_on_a_writer_that_reads)
{
	struct sync_set s;
	const char *n = lockname("rw");
	char rd[256], wr[256], p[400];
	struct http_resp r;
	struct bg first, beat;

	CHECK(sync_set_start(&s, 1), "master, replica, one dlockd with one thread");
	snprintf(rd, sizeof(rd), "/rwlocks/%s/read", n);
	snprintf(wr, sizeof(wr), "/rwlocks/%s/write", n);
	CHECK(status_of(&s.d[0], "PUT", "%s?owner=x&ttl_ms=20000", wr) == 200, "x writes");
	CHECK(status_of(&s.d[0], "PUT", "%s?owner=x&ttl_ms=10000", rd) == 200, "and reads");

	/* a read re-entry, unconfirmed; behind it the writer's heartbeat,
	 * which stands whatever the replicas say */
	CHECK(kill(s.rep.pid, SIGSTOP) == 0, "stop the replica");
	snprintf(p, sizeof(p), "%s?owner=x&ttl_ms=60000&reentrant=true", rd);
	bg_start_on(&first, s.d[0].base, "PUT", p, NULL);
	sleep_ms(300);
	snprintf(p, sizeof(p), "/rwlocks/%s/write/heartbeat", n);
	bg_start_on(&beat, s.d[0].base, "POST", p, "{\"owner\":\"x\",\"ttl_ms\":60000}");
	bg_join(&first);
	CHECK(kill(s.rep.pid, SIGCONT) == 0, "the replica runs again");
	bg_join(&beat);
	CHECK_ERROR(first.r, 503, "replication_unconfirmed", "the read re-entry");
	CHECK(json_bool(&first.r, "undone") == 1, "its own holding had not changed: undone (%s)",
	      first.r.body);
	CHECK_STATUS(beat.r, 200, "the writer's heartbeat");
	http_free(&first.r);
	http_free(&beat.r);
	CHECK(holds_of(&s, &sync_kinds[2], n, "x") == 1, "x reads with one hold again (%lld)",
	      holds_of(&s, &sync_kinds[2], n, "x"));
	CHECK(rcmd_int_on(&s.m, "PTTL %s", n) > 55000, "the heartbeat's write lease stands "
	      "(pttl %lld)", rcmd_int_on(&s.m, "PTTL %s", n));
	CHECK(rcmd_int_on(&s.m, "PTTL {%s}:x:rwlock_timeout:1", n) <= 10000,
	      "the read hold keeps its lease");

	/* a read repeat with a longer lease, alone: put back, the write lease
	 * it lengthened too */
	CHECK(WAIT_FOR(status_of(&s.d[0], "POST", "/rwlocks/%s/write/heartbeat?owner=x&ttl_ms=20000",
				 n) == 200 && rcmd_int_on(&s.m, "PTTL %s", n) <= 20000, 10000),
	      "the write lease back at 20 s, confirmed");
	CHECK(unconfirmed_put(&s, rd, 90000, false, &r), "an unconfirmed read repeat");
	CHECK(json_bool(&r, "undone") == 1, "undone (%s)", r.body);
	http_free(&r);
	CHECK(rcmd_int_on(&s.m, "PTTL {%s}:x:rwlock_timeout:1", n) <= 10000 &&
	      rcmd_int_on(&s.m, "PTTL %s", n) <= 20000, "both leases put back (read %lld, lock %lld)",
	      rcmd_int_on(&s.m, "PTTL {%s}:x:rwlock_timeout:1", n), rcmd_int_on(&s.m, "PTTL %s", n));
	CHECK(holds_of(&s, &sync_kinds[3], n, "x") == 1, "x still writes");

	/* x gives the write side up and reads alone; an unconfirmed upgrade
	 * leaves it reading, the lock read-locked */
	CHECK(WAIT_FOR(status_of(&s.d[0], "DELETE", "%s?owner=x", wr) == 200, 10000),
	      "x stops writing");
	CHECK(unconfirmed_put(&s, wr, 20000, false, &r), "an unconfirmed upgrade");
	CHECK(json_bool(&r, "undone") == 1, "undone (%s)", r.body);
	http_free(&r);
	CHECK(holds_of(&s, &sync_kinds[3], n, "x") == 0 && holds_of(&s, &sync_kinds[2], n, "x") == 1,
	      "x reads and does not write");
	snprintf(p, sizeof(p), "/rwlocks/%s", n);
	http_on(s.d[0].base, "GET", p, NULL, &r);
	CHECK(json_str(&r, "mode") && !strcmp(json_str(&r, "mode"), "read"), "read-locked: %s",
	      r.body);
	http_free(&r);
	CHECK(WAIT_FOR(status_of(&s.d[0], "DELETE", "%s?owner=x", rd) == 200, 10000),
	      "x stops reading");
	CHECK(sync_set_stop(&s), "clean exits");
}

/* The same for a session's holdings: the session holds the write side,
 * and its read grant (PUT with session=) is unconfirmed while the
 * session's heartbeat, through the other dlockd, renews the write side.
 * The read's undo puts back the write lease the read grant found only if
 * the write holding has not changed since, and the heartbeat's renewal
 * is such a change: the write lease the heartbeat gave stands. (A
 * heartbeat's renewal of a grant keeps that grant undoable, for a
 * multi-lock's take-back; a build that kept the number unchanged to do
 * so cut the write lease back here.) */
TEST(sync_replicas_session_read_undo_keeps_the_heartbeats_write_lease)
{
	struct sync_set s;
	const char *n = lockname("sessrw");
	char id[33], p[400];
	struct bg first, beat;
	long long scripts, pttl;

	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	CHECK(session_start_on(s.d[0].base, 20000, id), "a session of 20 s");
	CHECK(status_of(&s.d[0], "PUT", "/rwlocks/%s/write?session=%s", n, id) == 200,
	      "the session writes");
	sleep_ms(4000);		/* the write lease has 16 s left; a heartbeat gives 20 */
	CHECK(kill(s.rep.pid, SIGSTOP) == 0, "stop the replica");
	snprintf(p, sizeof(p), "/rwlocks/%s/read?session=%s", n, id);
	scripts = redis_script_calls(&s.m);
	bg_start_on(&first, s.d[0].base, "PUT", p, NULL);
	CHECK(WAIT_FOR(redis_script_calls(&s.m) > scripts + 1, 900),
	      "the read grant reached redis (the session read, then the grant)");
	sleep_ms(200);
	snprintf(p, sizeof(p), "/sessions/%s/heartbeat", id);
	bg_start_on(&beat, sync_other(&s), "POST", p, NULL);
	bg_join(&first);
	CHECK(kill(s.rep.pid, SIGCONT) == 0, "the replica runs again");
	bg_join(&beat);
	pttl = rcmd_int_on(&s.m, "PTTL %s", n);
	printf("# a session's read grant undone after its heartbeat: %ld %s; heartbeat %ld; "
	       "the write lease left %lld ms\n", first.r.status, first.r.body ? first.r.body : "",
	       beat.r.status, pttl);
	CHECK_ERROR(first.r, 503, "replication_unconfirmed", "the read grant");
	CHECK(json_bool(&first.r, "undone") == 1, "its own holding had not changed: undone (%s)",
	      first.r.body);
	CHECK_STATUS(beat.r, 200, "the heartbeat");
	CHECK(holds_of(&s, &sync_kinds[2], n, id) == 0 && holds_of(&s, &sync_kinds[3], n, id) == 1,
	      "the session writes and does not read");
	CHECK(pttl > 17000, "the heartbeat's write lease stands (pttl %lld, want about 19000; the "
	      "lease before it ended 4 s sooner)", pttl);
	http_free(&first.r);
	http_free(&beat.r);
	CHECK(WAIT_FOR(status_of(&s.d[0], "DELETE", "/sessions/%s", id) == 200, 10000),
	      "the session ends");
	CHECK(sync_set_stop(&s), "clean exits");
}

/* Two PUTs with session= of one lock, the second through the other
 * dlockd 0.3 s after the first, neither confirmed by the replica: the
 * first's grant, then the second's repeat of it. The first's undo found
 * the repeat (a later change) and left the holding; the second's undo put
 * the repeat back -- and the lock stayed held by the session's id, in no
 * session's record, after both answered 503 and after the session ended
 * (a probe: 19 of 19 runs). The first's undo now marks the grant under
 * the repeat as withdrawn, and the repeat's undo takes it back whole. */
TEST(sync_replicas_two_unconfirmed_session_grants_leave_nothing)
{
	struct sync_set s;
	char id[33], path[256], p[400];
	struct bg first, second;
	long long scripts;

	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	CHECK(session_start_on(s.d[0].base, 30000, id), "a session");
	for (size_t i = 0; i < sizeof(sync_kinds) / sizeof(sync_kinds[0]) && !test_failed(); i++) {
		const struct sync_kind *k = &sync_kinds[i];
		const char *n = lockname("twounconf");

		snprintf(path, sizeof(path), k->path, n);
		snprintf(p, sizeof(p), "%s?session=%s", path, id);
		CHECK(kill(s.rep.pid, SIGSTOP) == 0, "stop the replica");
		scripts = redis_script_calls(&s.m);
		bg_start_on(&first, s.d[0].base, "PUT", p, NULL);
		CHECK(WAIT_FOR(redis_script_calls(&s.m) > scripts + 1, 900),
		      "%s: the first grant reached redis", k->label);
		sleep_ms(300);
		bg_start_on(&second, sync_other(&s), "PUT", p, NULL);
		bg_join(&first);
		bg_join(&second);
		CHECK(kill(s.rep.pid, SIGCONT) == 0, "the replica runs again");
		printf("# %s: two unconfirmed session grants: %ld %s; %ld %s; held after: %lld\n",
		       k->label, first.r.status, first.r.body ? first.r.body : "", second.r.status,
		       second.r.body ? second.r.body : "", holds_of(&s, k, n, id));
		CHECK_ERROR(first.r, 503, "replication_unconfirmed", "the first");
		CHECK_ERROR(second.r, 503, "replication_unconfirmed", "the second");
		CHECK(json_bool(&second.r, "undone") == 1, "%s: the second undone (%s)", k->label,
		      second.r.body);
		CHECK(holds_of(&s, k, n, id) == 0, "%s: the session's id holds the lock after two "
		      "503s", k->label);
		http_free(&first.r);
		http_free(&second.r);
	}
	CHECK(WAIT_FOR(status_of(&s.d[0], "DELETE", "/sessions/%s", id) == 200, 10000),
	      "the session ends");
	CHECK(sync_set_stop(&s), "clean exits");
}

/* How many holdings the session's record lists (-1: not read). */
static long session_holdings(const char *base, const char *id)
{
	char path[96];
	struct http_resp r;
	json_t *h;
	long n;

	snprintf(path, sizeof(path), "/sessions/%s", id);
	http_on(base, "GET", path, NULL, &r);
	h = r.json ? json_object_get(r.json, "holdings") : NULL;
	n = r.status == 200 && json_is_array(h) ? (long)json_array_size(h) : -1;
	http_free(&r);
	return n;
}

/* The same as above with a multi-lock first, its grant unconfirmed, and
 * a PUT with session= 0.3 s later that repeats it, unconfirmed too. The
 * multi-lock's take-back finds the repeat and leaves the holding (its 503
 * says "undone": false); the repeat's undo then takes it back whole. After
 * both, nothing is held and the session lists nothing: no path may leave
 * the holding behind, or listed while another owner can take the lock.
 * (A guard of the multi-lock's take-back beside a repeat: it passed on
 * 826a64a and b80756c too.) */
TEST(sync_replicas_unconfirmed_multilock_and_its_repeat_leave_nothing)
{
	/* lock_undo.lua and rw_undo.lua */
	static const char *const kinds[] = { "lock", "fair lock", "read lock" };
	static const char *const body_kinds[] = { "lock", "fair", "read" };
	struct sync_set s;
	char id[33], path[256], p[400], body[300];
	struct bg first, second;
	long long scripts;

	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	CHECK(session_start_on(s.d[0].base, 30000, id), "a session");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && !test_failed(); i++) {
		const struct sync_kind *k = &sync_kinds[i];
		const char *n = lockname("mlrepeat");
		long listed;

		CHECK(!strcmp(k->label, kinds[i]), "kind %s", k->label);
		snprintf(path, sizeof(path), k->path, n);
		snprintf(p, sizeof(p), "%s?session=%s", path, id);
		snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"%s\",\"name\":\"%s\"}]}",
			 body_kinds[i], n);
		CHECK(kill(s.rep.pid, SIGSTOP) == 0, "stop the replica");
		scripts = redis_script_calls(&s.m);
		snprintf(path, sizeof(path), "/sessions/%s/locks", id);
		bg_start_on(&first, s.d[0].base, "PUT", path, body);
		CHECK(WAIT_FOR(redis_script_calls(&s.m) > scripts + 1, 900),
		      "%s: the multi-lock's grant reached redis", k->label);
		sleep_ms(300);
		bg_start_on(&second, sync_other(&s), "PUT", p, NULL);
		bg_join(&first);
		bg_join(&second);
		CHECK(kill(s.rep.pid, SIGCONT) == 0, "the replica runs again");
		listed = session_holdings(s.d[0].base, id);
		printf("# %s: a multi-lock, then a repeat, both unconfirmed: %ld %s; %ld %s; held "
		       "after: %lld, listed: %ld\n", k->label, first.r.status,
		       first.r.body ? first.r.body : "", second.r.status,
		       second.r.body ? second.r.body : "", holds_of(&s, k, n, id), listed);
		CHECK_ERROR(first.r, 503, "replication_unconfirmed", "the multi-lock");
		CHECK_ERROR(second.r, 503, "replication_unconfirmed", "the repeat");
		CHECK(holds_of(&s, k, n, id) == 0, "%s: the session's id holds the lock after two "
		      "503s", k->label);
		CHECK(listed == 0, "%s: the session lists %ld holdings after two 503s", k->label,
		      listed);
		http_free(&first.r);
		http_free(&second.r);
	}
	CHECK(WAIT_FOR(status_of(&s.d[0], "DELETE", "/sessions/%s", id) == 200, 10000),
	      "the session ends");
	CHECK(sync_set_stop(&s), "clean exits");
}

/* A grant whose answer cannot be delivered (its client left while the
 * WAIT ran) is taken back when its request ends, as nobody learns of it --
 * but only that grant: the owner's retry, answered 200 meanwhile, stands.
 * On two dlockd, and on one with one thread (the retry queued behind the
 * WAIT). */
TEST(sync_replicas_grant_nobody_heard_of_keeps_a_retry)
{
	for (int instances = 2; instances >= 1 && !test_failed(); instances--) {
		struct sync_set s;
		const char *n = lockname("gone");
		char rq[600], p[400];
		struct bg retry;
		long long scripts;
		int fd;

		CHECK(sync_set_start(&s, instances), "master, replica, %d dlockd", instances);
		CHECK(kill(s.rep.pid, SIGSTOP) == 0, "stop the replica");
		scripts = redis_script_calls(&s.m);
		fd = raw_connect(s.d[0].port);
		CHECK(fd >= 0, "connect");
		snprintf(rq, sizeof(rq), "PUT /locks/%s?owner=x&ttl_ms=20000 HTTP/1.1\r\n"
			 "Host: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", n);
		/* corked: the request and the FIN leave together (see test_wait.c) */
		setsockopt(fd, IPPROTO_TCP, TCP_CORK, &(int){ 1 }, sizeof(int));
		CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq), "send");
		shutdown(fd, SHUT_WR);
		CHECK(WAIT_FOR(redis_script_calls(&s.m) > scripts, 2000), "granted in redis");
		sleep_ms(300);
		snprintf(p, sizeof(p), "/locks/%s?owner=x&ttl_ms=20000", n);
		bg_start_on(&retry, sync_other(&s), "PUT", p, NULL);
		sleep_ms(300);	/* well within the first call's WAIT: it is confirmed */
		CHECK(kill(s.rep.pid, SIGCONT) == 0, "the replica runs again");
		bg_join(&retry);
		CHECK_STATUS(retry.r, 200, "x's retry");
		http_free(&retry.r);
		CHECK(WAIT_FOR(file_contains(s.d[0].log, "\"delivered\":false"), 5000),
		      "%d dlockd: the first answer was not delivered", instances);
		close(fd);
		sleep_ms(200);	/* its undo, if any, has run */
		CHECK(!rival_gets(&s, &sync_kinds[0], n), "%d dlockd: another client was granted the "
		      "lock x's retry was told it holds", instances);
		CHECK(holds_of(&s, &sync_kinds[0], n, "x") == 1, "x holds it once");
		CHECK(status_of(&s.d[0], "DELETE", "/locks/%s?owner=x", n) == 200, "x releases");
		CHECK(sync_set_stop(&s), "clean exits");
	}
}

/* ----- Owners interleaving their calls while the replica comes and goes -----
 *
 * Three owners take one lock again and again through two dlockd while the
 * replica is stopped and resumed at random. In each round an owner PUTs
 * on one dlockd and, at a random moment while that may still wait for the
 * replica, retries the PUT or heartbeats on the other; if told it holds
 * the lock it may heartbeat once more, then releases it (it releases in
 * any case, to clear a grant that may stand). What each 200 told an owner
 * is an interval: from its answer to its send plus its ttl_ms (the lease
 * counts from no earlier than the send), cut at the owner's own release.
 * No two owners' intervals may overlap, no release or heartbeat inside an
 * interval may find the holding gone, and nothing else than a 200, a 409,
 * or a 503 replication_unconfirmed or backend_unavailable may come. */

#define MIX_OWNERS 3
#define MIX_LEASE 3000
#define MIX_MAX_SPANS 400

struct mix_span {
	int64_t from, to;
};

struct mix_owner {
	const struct sync_set *s;
	const struct sync_kind *k;
	char path[256], beat[256];	/* the lock's acquire/release and heartbeat paths */
	char owner[16];
	unsigned seed;
	int64_t until;
	struct mix_span spans[MIX_MAX_SPANS];
	int nspans;
	int rounds, undone, standing;
	char error[400];	/* the first thing that went wrong */
};

/* One call and what it told. */
struct mix_call {
	struct mix_owner *o;
	const char *base, *method;
	char path[300];
	const char *body;
	int delay_ms;
	int64_t sent, answered;
	long status;
	long long ttl;
	int undone;
	char error[40];
};

static void mix_do(struct mix_call *c)
{
	struct http_resp r;

	if (c->delay_ms)
		sleep_ms(c->delay_ms);
	c->sent = mono_ms();
	http_on(c->base, c->method, c->path, c->body, &r);
	c->answered = mono_ms();
	c->status = r.status;
	c->ttl = r.status == 200 ? json_int(&r, "ttl_ms") : 0;
	c->undone = json_bool(&r, "undone");
	snprintf(c->error, sizeof(c->error), "%s", json_str(&r, "error") ? json_str(&r, "error") : "");
	http_free(&r);
}

static void *mix_do_thread(void *arg)
{
	mix_do(arg);
	return NULL;
}

static void mix_fail(struct mix_owner *o, const char *what, const struct mix_call *c)
{
	/* (its length is the message's business: a cut one still says it) */
	if (!*o->error && snprintf(o->error, sizeof(o->error), "%s: %s %s%s answered %ld %s",
				   what, c->method, c->base, c->path, c->status, c->error) < 0)
		o->error[0] = '?';
}

/* What c told o: a span if it was a 200; anything unexpected is o's error. */
static void mix_note(struct mix_owner *o, const struct mix_call *c)
{
	if (c->status == 200 && c->ttl > 0 && o->nspans < MIX_MAX_SPANS) {
		o->spans[o->nspans].from = c->answered;
		o->spans[o->nspans].to = c->sent + c->ttl;
		o->nspans++;
	} else if (c->status == 503 && !strcmp(c->error, "replication_unconfirmed")) {
		o->undone += c->undone == 1;
		o->standing += c->undone == 0;
		if (c->undone < 0)
			mix_fail(o, "a replication_unconfirmed without undone", c);
	} else if (c->status != 409 && c->status != 200 &&
		   !(c->status == 503 && !strcmp(c->error, "backend_unavailable"))) {
		mix_fail(o, "unexpected answer", c);
	}
}

/* Does o believe, at t, that it holds the lock (a span of this round,
 * from first, covers t)? */
static bool mix_told(const struct mix_owner *o, int first, int64_t t)
{
	for (int i = first; i < o->nspans; i++)
		if (o->spans[i].from <= t && t < o->spans[i].to)
			return true;
	return false;
}

static void *mix_owner_main(void *arg)
{
	struct mix_owner *o = arg;
	const struct sync_set *s = o->s;
	char body[128];

	snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"ttl_ms\":%d}", o->owner, MIX_LEASE);
	while (mono_ms() < o->until && !*o->error) {
		int i = rand_r(&o->seed) % 2, first = o->nspans, second = rand_r(&o->seed) % 3;
		struct mix_call a = { .o = o, .base = s->d[i].base, .method = "PUT" };
		struct mix_call b = { .o = o, .base = s->d[1 - i].base,
				      .delay_ms = rand_r(&o->seed) % 400 };
		struct mix_call c = { .o = o };
		pthread_t t;

		o->rounds++;
		snprintf(a.path, sizeof(a.path), "%s?owner=%s&ttl_ms=%d", o->path, o->owner,
			 MIX_LEASE);
		if (second == 0) {		/* the retry */
			b.method = "PUT";
			snprintf(b.path, sizeof(b.path), "%s", a.path);
		} else if (second == 1) {	/* a heartbeat */
			b.method = "POST";
			snprintf(b.path, sizeof(b.path), "%s", o->beat);
			b.body = body;
		}
		if (second < 2)
			pthread_create(&t, NULL, mix_do_thread, &b);
		mix_do(&a);
		if (second < 2)
			pthread_join(t, NULL);
		mix_note(o, &a);
		if (second < 2)
			mix_note(o, &b);

		sleep_ms(rand_r(&o->seed) % 300);
		if (mix_told(o, first, mono_ms()) && rand_r(&o->seed) % 2) {
			c.base = s->d[rand_r(&o->seed) % 2].base;
			c.method = "POST";
			snprintf(c.path, sizeof(c.path), "%s", o->beat);
			c.body = body;
			mix_do(&c);
			if (c.status == 409 && mix_told(o, first, c.sent + 5))
				mix_fail(o, "told it holds the lock, its heartbeat found it gone", &c);
			mix_note(o, &c);
		}
		c = (struct mix_call){ .o = o, .base = s->d[rand_r(&o->seed) % 2].base,
				       .method = "DELETE" };
		snprintf(c.path, sizeof(c.path), "%s?owner=%s", o->path, o->owner);
		mix_do(&c);
		if (c.status == 409 && mix_told(o, first, c.sent + 5))
			mix_fail(o, "told it holds the lock, its release found it gone", &c);
		if (c.status != 200 && c.status != 409)
			mix_note(o, &c);
		for (int k = first; k < o->nspans; k++)	/* it let go when it sent that */
			if (o->spans[k].to > c.sent)
				o->spans[k].to = c.sent;
		sleep_ms(rand_r(&o->seed) % 100);
	}
	return NULL;
}

/* The mix for 9 s on a lock of kind k (one whose holders exclude each
 * other). */
static void mix(struct sync_set *s, const struct sync_kind *k, unsigned seed)
{
	static struct mix_owner owners[MIX_OWNERS];
	const char *n = lockname("mix");
	pthread_t t[MIX_OWNERS];
	int64_t until = mono_ms() + 9000;
	int rounds = 0, undone = 0, standing = 0, spans = 0;

	for (int i = 0; i < MIX_OWNERS; i++) {
		memset(&owners[i], 0, sizeof(owners[i]));
		owners[i].s = s;
		owners[i].k = k;
		snprintf(owners[i].path, sizeof(owners[i].path), k->path, n);
		snprintf(owners[i].beat, sizeof(owners[i].beat), k->beat, n);
		snprintf(owners[i].owner, sizeof(owners[i].owner), "o%d", i);
		owners[i].seed = seed + (unsigned)i;
		owners[i].until = until;
		pthread_create(&t[i], NULL, mix_owner_main, &owners[i]);
	}
	while (mono_ms() < until) {
		kill(s->rep.pid, SIGSTOP);
		sleep_ms(800 + rand_r(&seed) % 1500);
		kill(s->rep.pid, SIGCONT);
		sleep_ms(200 + rand_r(&seed) % 600);
	}
	for (int i = 0; i < MIX_OWNERS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < MIX_OWNERS; i++) {
		CHECK(!*owners[i].error, "%s, %s: %s", k->label, owners[i].owner, owners[i].error);
		rounds += owners[i].rounds;
		undone += owners[i].undone;
		standing += owners[i].standing;
		spans += owners[i].nspans;
	}
	/* no two owners told they hold the lock at once (2 ms for the clocks'
	 * granularity) */
	for (int i = 0; i < MIX_OWNERS; i++)
		for (int j = i + 1; j < MIX_OWNERS; j++)
			for (int a = 0; a < owners[i].nspans; a++)
				for (int b = 0; b < owners[j].nspans; b++) {
					const struct mix_span *x = &owners[i].spans[a];
					const struct mix_span *y = &owners[j].spans[b];
					int64_t from = x->from > y->from ? x->from : y->from;
					int64_t to = x->to < y->to ? x->to : y->to;

					CHECK(to - from <= 2, "%s: %s and %s were both told they "
					      "hold it for %lld ms (from %lld)", k->label,
					      owners[i].owner, owners[j].owner,
					      (long long)(to - from), (long long)from);
				}
	printf("# %s: %d rounds, %d holdings told, 503s: %d undone, %d that may stand\n",
	       k->label, rounds, spans, undone, standing);
	CHECK(status_of(&s->d[0], "GET", "/readyz") == 200 &&
	      status_of(&s->d[1], "GET", "/readyz") == 200, "both dlockd serve");
}

TEST(sync_replicas_interleaved_owners_never_overlap)
{
	struct sync_set s;
	unsigned seed = (unsigned)mono_ms();

	printf("# seed %u\n", seed);
	CHECK(sync_set_start(&s, 2), "master, replica, two dlockd");
	mix(&s, &sync_kinds[0], seed);
	if (!test_failed())
		mix(&s, &sync_kinds[3], seed + 100);
	CHECK(sync_set_stop(&s), "clean exits");
}

/* A multi-lock (PUT /sessions/{id}/locks) whose grant no replica confirms
 * is a 503 that takes nothing: replication_unconfirmed naming the lock,
 * and none of the set is held on the master. */
TEST(sync_replicas_unconfirmed_multi_lock_takes_nothing)
{
	struct redis_srv m = { 0 }, rep;
	struct dlockd_srv d;
	struct http_resp r;
	const char *n = lockname("unconf-multi");
	char id[33], path[128], body[600];

	CHECK(redis_start(&m) == 0, "start the master");
	CHECK(start_replica(&rep, &m), "the replica is online");
	CHECK(start_dlockd(&d, &m, "1"), "dlockd with --redis-sync-replicas 1");
	CHECK(session_start_on(d.base, 30000, id), "a session");
	test_at_end(resume_replica, &rep);
	CHECK(kill(rep.pid, SIGSTOP) == 0, "stop the replica");
	snprintf(path, sizeof(path), "/sessions/%s/locks", id);
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-a\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s-b\"}],\"wait_ms\":5000}", n, n);
	http_on(d.base, "PUT", path, body, &r);
	CHECK_ERROR(r, 503, "replication_unconfirmed", "a set no replica confirmed");
	CHECK(r.json && json_object_get(r.json, "lock"), "it names the lock: %s", r.body);
	http_free(&r);
	CHECK(WAIT_FOR(rcmd_int_on(&m, "EXISTS %s-a %s-b", n, n) == 0, 3000),
	      "none of the set is held on the master");
	CHECK(kill(rep.pid, SIGCONT) == 0, "the replica runs again");
	CHECK(WAIT_FOR(status_of(&d, "DELETE", "/sessions/%s", id) == 200, 10000), "end it");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rep, false);
	redis_stop(&m, false);
}
