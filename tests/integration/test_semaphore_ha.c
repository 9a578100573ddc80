/* test_semaphore_ha.c -- semaphores on a Redis Cluster (3 masters with a
 * replica each: every key of a semaphore in its one slot, its channel
 * SSUBSCRIBEd on the master of that slot, a release waking a waiter on
 * each master, the listing walking every master) and through Sentinel (a
 * master, two replicas, three sentinels); with --redis-sync-replicas, a
 * permit no replica confirmed is given back (sem_undo.lua). */
#include "../harness/cluster.h"
#include "../harness/sentinel.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static struct redis_cluster C;
static struct dlockd_srv D;

static void cluster_end(void *arg)
{
	(void)arg;
	dlockd_kill(&D);
	cluster_stop(&C);
}

TEST(cluster_semaphore_on_every_master_keys_in_one_slot_and_sharded_wakes)
{
	static char url[300];
	char names[3][128];

	test_at_end(cluster_end, &C);
	CHECK(cluster_start(&C, 3, 1) == 0, "the cluster starts");
	snprintf(url, sizeof(url), "redis://%s", C.seeds);
	CHECK(dlockd_start(&D, url, NULL) == 0, "dlockd starts on %s", url);
	if (test_failed())
		return;
	CHECK(cluster_names_per_master(&C, "csem", names), "a name on each master");
	for (int m = 0; m < 3; m++) {
		static const char *const keys[] = { "%s", "{%s}:timeout", "dlockd_lock_owners:{%s}",
						    "redisson_lock_token:{%s}" };
		char p[300], chan[200], key[200];
		long long s0;
		struct bg w;
		int64_t t0;

		CHECK(status_of(&D, "PUT", "/semaphores/%s?owner=h&limit=1&ttl_ms=30000&value=x",
				names[m]) == 200, "h takes the permit of %s", names[m]);
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			snprintf(key, sizeof(key), keys[k], names[m]);
			CHECK(cluster_has_key(&C, m, key), "%s on master %d", key, m);
		}
		snprintf(chan, sizeof(chan), "redisson_sc:{%s}", names[m]);
		s0 = redis_script_calls(&C.node[m]);
		snprintf(p, sizeof(p), "/semaphores/%s?owner=w&limit=1&ttl_ms=30000&wait_ms=20000",
			 names[m]);
		bg_start_on(&w, D.base, "PUT", p, NULL);
		CHECK(wait_parked_on(&D, &C.node[m], s0, &C.node[m], true, chan),
		      "w waits, SSUBSCRIBEd on master %d", m);
		t0 = mono_ms();
		CHECK(status_of(&D, "DELETE", "/semaphores/%s?owner=h", names[m]) == 200,
		      "h gives it back");
		CHECK_GRANTED_WITHIN(w, t0, 3000, "w, woken by the release");
		http_free(&w.r);
	}
	{
		char why[256] = "", q[200];
		int pages = 0, dups = 0;
		json_t *all;

		/* the names' common start: t<pid>-<test>-csem- */
		snprintf(q, sizeof(q), "prefix=%.*s", (int)(strstr(names[0], "csem") - names[0] + 5),
			 names[0]);
		all = list_locks_all(&D, NULL, q, 2, &pages, &dups, why, sizeof(why));

		CHECK(all && json_object_size(all) == 3 && dups == 0,
		      "the listing finds the three semaphores on three masters (%s)", why);
		json_decref(all);
	}
	for (int m = 0; m < 3; m++)
		CHECK(status_of(&D, "DELETE", "/semaphores/%s?owner=w", names[m]) == 200,
		      "w gives back %s", names[m]);
	CHECK(dlockd_stop(&D, 5000) == 0, "clean exit");
	cluster_stop(&C);
}

static struct sentinel_topo S;
static struct dlockd_srv SD;

static void sentinel_end(void *arg)
{
	(void)arg;
	if (SD.pid > 0)
		dlockd_stop(&SD, 10000);
}

TEST(sentinel_semaphore_and_a_waiter)
{
	const char *n = lockname("ssem");
	char p[300];
	struct bg b;
	int64_t t0;

	memset(&SD, 0, sizeof(SD));
	CHECK(sentinel_topo_start(&S, 2) == 0, "the topology starts");
	test_at_end(sentinel_end, &SD);
	CHECK(dlockd_start(&SD, S.url, NULL) == 0, "dlockd on %s", S.url);
	CHECK(WAIT_FOR(status_of(&SD, "GET", "/readyz") == 200, 10000), "ready");
	CHECK(status_of(&SD, "PUT", "/semaphores/%s?owner=a&limit=2", n) == 200, "a permit");
	CHECK(status_of(&SD, "PUT", "/semaphores/%s?owner=b&limit=2", n) == 200, "another");
	CHECK(rcmd_int_on(&S.data[0], "ZCARD {%s}:timeout", n) == 2, "on the master");
	snprintf(p, sizeof(p), "/semaphores/%s?owner=c&limit=2&wait_ms=30000", n);
	bg_start_on(&b, SD.base, "PUT", p, NULL);
	CHECK(wait_waiters(&SD, 1, 10000), "c waits");
	CHECK(WAIT_FOR(channel_subscribers(&S.data[0], "redisson_sc:{%s}", n) >= 1, 10000),
	      "the subscriber listens on the master");
	CHECK(status_of(&SD, "DELETE", "/semaphores/%s?owner=a", n) == 200, "a gives it back");
	t0 = mono_ms();
	CHECK_GRANTED_WITHIN(b, t0, 3000, "c is woken by the release");
	http_free(&b.r);
}

/* ----- --redis-sync-replicas: an unconfirmed permit is given back ----- */

static void resume(void *arg)
{
	const struct redis_srv *rep = arg;

	if (rep->pid > 0)
		kill(rep->pid, SIGCONT);
}

static bool replica_online(const struct redis_srv *m)
{
	redisReply *x = rcmd_on(m, "INFO replication");
	bool on = x && x->type == REDIS_REPLY_STRING && strstr(x->str, "state=online");

	if (x)
		freeReplyObject(x);
	return on;
}

TEST(semaphore_permit_no_replica_confirmed_is_undone)
{
	static const char *const flags[] = { "--redis-sync-replicas", "1",
					     "--redis-sync-timeout-ms", "500", NULL };
	static struct redis_srv m, rep;
	struct dlockd_srv d;
	struct http_resp r;
	const char *n = lockname("semsync");
	char p[300];

	memset(&m, 0, sizeof(m));
	memset(&rep, 0, sizeof(rep));
	CHECK(redis_start(&m) == 0, "the master");
	snprintf(rep.extra, sizeof(rep.extra), "--replicaof 127.0.0.1 %d", m.port);
	CHECK(redis_start(&rep) == 0, "its replica");
	CHECK(WAIT_FOR(replica_online(&m), 10000), "the replica is online");
	CHECK(dlockd_start_on(&d, &m, flags) == 0, "dlockd with --redis-sync-replicas 1");
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 5000), "ready");
	CHECK(WAIT_FOR(status_of(&d, "PUT", "/semaphores/%s?owner=a&limit=2", n) == 200, 5000),
	      "a confirmed permit");

	test_at_end(resume, &rep);
	CHECK(kill(rep.pid, SIGSTOP) == 0, "stop the replica");
	snprintf(p, sizeof(p), "/semaphores/%s?owner=b&limit=2", n);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_ERROR(r, 503, "replication_unconfirmed", "a permit no replica confirmed");
	CHECK(json_bool(&r, "undone") == 1, "undone: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int_on(&m, "ZRANK {%s}:timeout b", n) == -999999 &&
	      rcmd_int_on(&m, "STRLEN %s", n) == 1 && rcmd_int_on(&m, "INCRBY %s 0", n) == 1,
	      "b's permit given back (no rank), the count as it was (%lld)",
	      rcmd_int_on(&m, "INCRBY %s 0", n));
	CHECK(rcmd_int_on(&m, "ZCARD {%s}:timeout", n) == 1, "a's permit stands");
	kill(rep.pid, SIGCONT);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	redis_stop(&rep, false);
	redis_stop(&m, false);
}

/* ----- With --auth-file ----- */

static struct dlockd_srv AD;

static void auth_end(void *arg)
{
	(void)arg;
	http_bearer(NULL);
	if (AD.pid > 0)
		dlockd_stop(&AD, 5000);
}

/* Only an admin changes a limit or forces every permit back; a client
 * token sees the owner ids and values of its own permits only, and
 * another token cannot give back or renew a permit taken under its own. */
TEST(semaphore_under_auth_admin_only_limit_and_force_owner_ids_by_token)
{
	const char *n = lockname("semauth");
	struct http_resp r;
	char p[400];

	memset(&AD, 0, sizeof(AD));
	test_at_end(auth_end, &AD);
	CHECK(dlockd_start_auth(&AD, "sem-tokens", "tok-sem-admin-1 admin * ops\n"
				"tok-sem-a-2 client * team-a\ntok-sem-b-3 client * team-b\n") == 0,
	      "start with --auth-file");
	http_bearer("tok-sem-a-2");
	CHECK(status_of(&AD, "PUT", "/semaphores/%s?owner=a1&limit=2&value=secret-a", n) == 200,
	      "team-a takes a permit");
	CHECK(status_of(&AD, "PUT", "/semaphores/%s/limit?limit=3", n) == 403,
	      "a client token may not change the limit");
	CHECK(status_of(&AD, "DELETE", "/semaphores/%s?force=true", n) == 403,
	      "nor force the permits back");
	http_bearer("tok-sem-b-3");
	CHECK(status_of(&AD, "PUT", "/semaphores/%s?owner=b1&limit=2", n) == 200,
	      "team-b takes the other");
	CHECK(status_of(&AD, "DELETE", "/semaphores/%s?owner=a1", n) == 409,
	      "team-b cannot give back team-a's permit");
	CHECK(status_of(&AD, "POST", "/semaphores/%s/heartbeat?owner=a1", n) == 409,
	      "nor renew it");
	snprintf(p, sizeof(p), "/semaphores/%s", n);
	http_on(AD.base, "GET", p, NULL, &r);
	CHECK(r.status == 200 && strstr(r.body, "b1") && !strstr(r.body, "a1") &&
	      !strstr(r.body, "secret-a"), "team-b sees its own owner id only: %s", r.body);
	http_free(&r);
	http_bearer("tok-sem-admin-1");
	http_on(AD.base, "GET", p, NULL, &r);
	CHECK(r.status == 200 && strstr(r.body, "a1") && strstr(r.body, "secret-a"),
	      "an admin sees all: %s", r.body);
	http_free(&r);
	CHECK(status_of(&AD, "PUT", "/semaphores/%s/limit?limit=3", n) == 200,
	      "an admin changes the limit");
	CHECK(status_of(&AD, "DELETE", "/semaphores/%s?force=true", n) == 200,
	      "and forces every permit back");
	http_bearer(NULL);
}
