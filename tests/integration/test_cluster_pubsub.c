/* test_cluster_pubsub.c -- sharded pub/sub (--redis-pubsub): on a real
 * Redis Cluster (3 masters with a replica each) dlockd's subscriber
 * SSUBSCRIBEs each channel on the master of its slot, so that it hears a
 * Redisson client's SPUBLISH and a Redisson waiter hears dlockd's; with
 * classic pub/sub it hears PUBLISH only (the mismatch Redisson users
 * must avoid); sharded works on a single Redis 7 too. The Redisson side
 * is played with Redisson's own scripts (harness.h) on the right node. */
#include "../harness/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JAVA_FIELD "9c345276-aa6e-44c1-b478-bf4b14ba1498:805"

/* The test's processes: stopped at its end, whatever failed. */
static struct redis_cluster C;
static struct dlockd_srv D;
static struct redis_srv R;

static void stop_all(void *arg)
{
	(void)arg;
	dlockd_kill(&D);
	cluster_stop(&C);
	redis_stop(&R, true);
}

static void start(struct redis_cluster *c, struct dlockd_srv *d, const char *mode)
{
	static char url[300];
	const char *flags[] = { "--redis-pubsub", mode, NULL };

	test_at_end(stop_all, &C);
	CHECK(cluster_start(c, 3, 1) == 0, "the cluster starts");
	snprintf(url, sizeof(url), "redis://%s", c->seeds);
	CHECK(dlockd_start(d, url, mode ? flags : NULL) == 0, "dlockd starts on %s", url);
}

/* auto on a Redis 7 cluster is sharded: each channel is SSUBSCRIBEd on
 * the master of its slot, and a waiter on each master is woken by the
 * release at once, not at the holder's lease end (30 s). */
TEST(cluster_auto_is_sharded_and_wakes_a_waiter_on_each_master)
{
	char names[3][128];

	start(&C, &D, NULL);
	if (test_failed())
		return;
	CHECK(cluster_names_per_master(&C, "sp", names), "a name on each master");
	CHECK(file_contains(D.log, "sharded pub/sub"), "the start-up line says sharded");
	for (int m = 0; m < 3; m++) {
		char p[200], chan[200];
		long long s0;
		struct bg w;
		int64_t t0;

		snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", names[m]);
		CHECK(lock_hold(&D, names[m], "h", 30000), "h holds %s", names[m]);
		s0 = redis_script_calls(&C.node[m]);
		snprintf(p, sizeof(p), "/locks/%s?owner=w&ttl_ms=30000&wait_ms=20000", names[m]);
		bg_start_on(&w, D.base, "PUT", p, NULL);
		CHECK(wait_parked_on(&D, &C.node[m], s0, &C.node[m], true, chan),
		      "w waits, SSUBSCRIBEd on master %d", m);
		t0 = mono_ms();
		CHECK(lock_release(&D, names[m], "h") == 200, "h releases");
		CHECK_GRANTED_WITHIN(w, t0, 3000, "w, woken by the release");
		http_free(&w.r);
		CHECK(lock_release(&D, names[m], "w") == 200, "w releases");
		CHECK(WAIT_FOR(redis_subscribers(&C.node[m], true, chan) == 0, 5000),
		      "the channel is let go on master %d", m);
	}
	CHECK(dlockd_stop(&D, 5000) == 0, "clean exit");
	cluster_stop(&C);
}

/* Redisson (sharded mode AUTO on a Redis 7 cluster) and dlockd hear each
 * other: Redisson's unlock with SPUBLISH wakes a dlockd waiter, and
 * dlockd's release reaches a raw SSUBSCRIBE of the lock's channel on the
 * master of its slot. */
TEST(cluster_sharded_interop_with_redisson)
{
	const char *n = lockname("rsharded");
	char p[300], chan[200];
	redisContext *sub;
	redisReply *rep;
	struct timeval tv = { 3 * slow_factor(), 0 };
	long long s0;
	struct bg w;
	int64_t t0;
	int m;

	start(&C, &D, NULL);
	if (test_failed())
		return;
	m = cluster_master_of(&C, 0, n);
	CHECK(m >= 0, "%s has a master", n);
	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", n);

	/* a Redisson client holds it; its unlock SPUBLISHes */
	rep = rcmd_on(&C.node[m], "EVAL %s 1 %s %s %s", redisson_acquire, n, "60000", JAVA_FIELD);
	CHECK(rep && rep->type == REDIS_REPLY_NIL, "Redisson client acquires");
	freeReplyObject(rep);
	s0 = redis_script_calls(&C.node[m]);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc&ttl_ms=30000&wait_ms=30000", n);
	bg_start_on(&w, D.base, "PUT", p, NULL);
	CHECK(wait_parked_on(&D, &C.node[m], s0, &C.node[m], true, chan), "dlockd waiter parked");
	rep = rcmd_on(&C.node[m], "EVAL %s 2 %s %s 0 30000 %s spublish", redisson_unlock, n, chan,
		       JAVA_FIELD);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1,
	      "Redisson client unlocks with SPUBLISH");
	freeReplyObject(rep);
	t0 = mono_ms();
	/* the lease had 60 s left: only the sharded message wakes it */
	CHECK_GRANTED_WITHIN(w, t0, 3000, "dlockd waiter acquires");
	http_free(&w.r);
	CHECK(lock_release(&D, n, "svc") == 200, "dlockd releases");

	/* a Redisson waiter: SSUBSCRIBE on the master of the slot */
	sub = redis_client(&C.node[m]);
	CHECK(sub, "subscriber connection");
	rep = redisCommand(sub, "SSUBSCRIBE %s", chan);
	CHECK(rep && rep->type == REDIS_REPLY_ARRAY, "subscribed like a Redisson waiter");
	freeReplyObject(rep);
	CHECK(lock_hold(&D, n, "svc", 30000), "dlockd holds it");
	CHECK(lock_release(&D, n, "svc") == 200, "dlockd releases");
	redisSetTimeout(sub, tv);
	rep = NULL;
	CHECK(redisGetReply(sub, (void **)&rep) == REDIS_OK && rep, "a message arrives");
	CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
	      !strcmp(rep->element[0]->str, "smessage") && !strcmp(rep->element[1]->str, chan) &&
	      !strcmp(rep->element[2]->str, "0"),
	      "smessage \"0\" on %s", chan);
	freeReplyObject(rep);
	redisFree(sub);
	CHECK(dlockd_stop(&D, 5000) == 0, "clean exit");
	cluster_stop(&C);
}

/* --redis-pubsub classic on a cluster keeps the classic subscriber: a
 * classic PUBLISH wakes a waiter, an SPUBLISH does not (a Redisson client
 * in sharded mode would not wake it: the mismatch the setting is for). */
TEST(cluster_classic_hears_publish_not_spublish)
{
	const char *n = lockname("classic");
	char p[300], chan[200];
	redisReply *rep;
	long long s0;
	struct bg w;
	int64_t t0;
	int m, at = -1;

	start(&C, &D, "classic");
	if (test_failed())
		return;
	CHECK(file_contains(D.log, "\"pubsub\":\"classic\""), "the start-up line says classic");
	m = cluster_master_of(&C, 0, n);
	CHECK(m >= 0, "%s has a master", n);
	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", n);
	CHECK(lock_hold(&D, n, "h", 30000), "h holds it");
	s0 = redis_script_calls(&C.node[m]);
	snprintf(p, sizeof(p), "/locks/%s?owner=w&ttl_ms=30000&wait_ms=30000", n);
	bg_start_on(&w, D.base, "PUT", p, NULL);
	CHECK(wait_waiters(&D, 1, 10000), "w waits");
	/* the classic subscriber is on one node, whichever it picked */
	CHECK(WAIT_FOR((at = 0, redis_subscribers(&C.node[0], false, chan) >= 1) ||
			       (at = 1, redis_subscribers(&C.node[1], false, chan) >= 1) ||
			       (at = 2, redis_subscribers(&C.node[2], false, chan) >= 1),
		       10000),
	      "SUBSCRIBEd on a seed");
	CHECK(wait_parked_on(&D, &C.node[m], s0, &C.node[at], false, chan), "w parked");
	CHECK(redis_subscribers(&C.node[m], true, chan) == 0, "no sharded subscription");

	/* h's hold goes (as an unlock would), announced with SPUBLISH */
	rep = rcmd_on(&C.node[m], "DEL %s", n);
	freeReplyObject(rep);
	rep = rcmd_on(&C.node[m], "SPUBLISH %s 0", chan);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
	      "SPUBLISH reaches no subscriber");
	freeReplyObject(rep);
	sleep_ms(1500);	/* what is under test: nothing wakes it meanwhile */
	CHECK(waiters_of(&D) == 1, "w still waits after the SPUBLISH");

	rep = rcmd_on(&C.node[(m + 1) % 3], "PUBLISH %s 0", chan);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER, "classic PUBLISH");
	freeReplyObject(rep);
	t0 = mono_ms();
	CHECK_GRANTED_WITHIN(w, t0, 3000, "w, woken by the classic PUBLISH");
	http_free(&w.r);
	CHECK(lock_release(&D, n, "w") == 200, "w releases");
	CHECK(dlockd_stop(&D, 5000) == 0, "clean exit");
	cluster_stop(&C);
}

/* --redis-pubsub sharded on a single Redis 7: SSUBSCRIBE works there
 * too; a lock cycle and a waiter woken by the release. */
TEST(standalone_sharded_pubsub_wakes_a_waiter)
{
	const char *flags[] = { "--redis-pubsub", "sharded", NULL };
	const char *n = lockname("single");
	char p[300], chan[200];
	long long s0;
	struct bg w;
	int64_t t0;

	test_at_end(stop_all, &C);
	memset(&R, 0, sizeof(R));
	CHECK(redis_start(&R) == 0, "redis starts");
	CHECK(dlockd_start_on(&D, &R, flags) == 0, "dlockd starts");
	CHECK(file_contains(D.log, "\"pubsub\":\"sharded\""), "the start-up line says sharded");
	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", n);
	CHECK(lock_hold(&D, n, "h", 30000), "h holds it");
	CHECK(lock_release(&D, n, "h") == 200, "h releases");
	CHECK(lock_hold(&D, n, "h", 30000), "h holds it again");
	s0 = redis_script_calls(&R);
	snprintf(p, sizeof(p), "/locks/%s?owner=w&ttl_ms=30000&wait_ms=20000", n);
	bg_start_on(&w, D.base, "PUT", p, NULL);
	CHECK(wait_parked_on(&D, &R, s0, &R, true, chan), "w parked, SSUBSCRIBEd");
	t0 = mono_ms();
	CHECK(lock_release(&D, n, "h") == 200, "h releases");
	CHECK_GRANTED_WITHIN(w, t0, 3000, "w, woken by the release");
	http_free(&w.r);
	CHECK(lock_release(&D, n, "w") == 200, "w releases");
	CHECK(dlockd_stop(&D, 5000) == 0, "clean exit");
	redis_stop(&R, true);
}
