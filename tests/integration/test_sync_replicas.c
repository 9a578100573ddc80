/* test_sync_replicas.c -- --redis-sync-replicas: a WAIT after lock changes
 * on a master with a real replica (redis-server --replicaof) on loopback.
 * A grant the replica confirms is on it when the 200 comes; one it cannot
 * confirm (stopped with SIGSTOP) is answered 503 replication_unconfirmed
 * and undone on the master; auto follows ROLE's count; off sends no WAIT. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	http_free(&r);
	CHECK(WAIT_FOR(rcmd_int_on(&m, "EXISTS %s", n) == 0, 3000),
	      "the grant was undone on the master");
	CHECK(metric_value(&d, "dlockd_replication_unconfirmed_total") >= 1, "counted");

	/* a repeat added no hold: 503 all the same, and the lock stays held */
	snprintf(path, sizeof(path), "/locks/%s?owner=a&ttl_ms=30000", held);
	http_on(d.base, "PUT", path, NULL, &r);
	CHECK_ERROR(r, 503, "replication_unconfirmed", "repeat no replica confirmed");
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
