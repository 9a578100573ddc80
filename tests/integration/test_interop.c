/* test_interop.c -- dlockd and a Redisson client on one Redis. The Redisson
 * client is played with raw Redis commands and Redisson's own scripts
 * (as Redisson's RedissonLock sends them): field "<uuid>:<threadId>", PEXPIRE,
 * PUBLISH redisson_lock__channel:{N} 0. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JAVA_FIELD "9c345276-aa6e-44c1-b478-bf4b14ba1498:805"

TEST(redisson_holder_excludes_dlockd_and_its_release_wakes_a_dlockd_waiter)
{
	const char *n = lockname("rj");
	char p[512], chan[300];
	struct http_resp r;
	struct bg w;
	redisReply *rep;
	int64_t released_at;
	long long scripts0;

	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", n);
	rep = rcmd("EVAL %s 1 %s %s %s", redisson_acquire, n, "60000", JAVA_FIELD);
	CHECK(rep && rep->type == REDIS_REPLY_NIL, "Redisson client acquires");
	freeReplyObject(rep);

	snprintf(p, sizeof(p), "/locks/%s?owner=svc", n);
	http("PUT", p, NULL, &r);
	CHECK_ERROR(r, 409, "locked", "dlockd sees the Redisson holder");
	CHECK(json_int(&r, "ttl_ms") > 55000, "with its lease: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=" JAVA_FIELD, n);
	http("GET", p, NULL, &r);
	CHECK(json_bool(&r, "held") == 1 && json_int(&r, "holds") == 1,
	      "status by the Redisson field: %s", r.body);
	http_free(&r);

	snprintf(p, sizeof(p), "/locks/%s?owner=svc&wait_ms=30000", n);
	scripts0 = redis_scripts_called();
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_parked(NULL, 1, scripts0, 5000, "%s", chan), "dlockd waiter waiting");
	rep = rcmd("EVAL %s 2 %s %s 0 30000 %s publish", redisson_unlock, n, chan, JAVA_FIELD);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1, "Redisson client unlocks");
	freeReplyObject(rep);
	released_at = mono_ms();
	/* the lease had 60 s left: only Redisson's unlock message wakes it */
	CHECK_GRANTED_WITHIN(w, released_at, 500, "dlockd waiter acquires");
	http_free(&w.r);

	rep = rcmd("EVAL %s 1 %s %s %s", redisson_acquire, n, "30000", JAVA_FIELD);
	CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0,
	      "Redisson's acquire sees dlockd's holder (pttl %lld)", rep ? rep->integer : -1);
	freeReplyObject(rep);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc", n);
	http("DELETE", p, NULL, &r);
	http_free(&r);
}

TEST(dlockd_release_publishes_0_to_redisson_subscribers)
{
	const char *n = lockname("jr");
	char p[512], chan[300];
	struct http_resp r;
	redisContext *sub = redis_client(NULL);
	redisReply *rep = NULL;
	struct timeval tv = { 3 * slow_factor(), 0 };

	CHECK(sub, "subscriber connection");
	snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", n);
	rep = redisCommand(sub, "SUBSCRIBE %s", chan);
	CHECK(rep && rep->type == REDIS_REPLY_ARRAY, "subscribed like a Redisson waiter");
	freeReplyObject(rep);

	snprintf(p, sizeof(p), "/locks/%s?owner=svc", n);
	http("PUT", p, NULL, &r);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc&reentrant=true", n);
	http("PUT", p, NULL, &r);	/* re-entry: the partial release must not publish */
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=svc", n);
	http("DELETE", p, NULL, &r);
	http_free(&r);
	http("DELETE", p, NULL, &r);
	CHECK(json_bool(&r, "released") == 1, "released");
	http_free(&r);

	redisSetTimeout(sub, tv);
	CHECK(redisGetReply(sub, (void **)&rep) == REDIS_OK && rep, "a message arrives");
	CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
	      !strcmp(rep->element[0]->str, "message") && !strcmp(rep->element[1]->str, chan) &&
	      !strcmp(rep->element[2]->str, "0"),
	      "message \"0\" on %s", chan);
	freeReplyObject(rep);
	rep = rcmd("EVAL %s 1 %s %s %s", redisson_acquire, n, "30000", JAVA_FIELD);
	CHECK(rep && rep->type == REDIS_REPLY_NIL, "Redisson can take it now");
	freeReplyObject(rep);

	/* Only one message: the partial release published nothing. */
	tv.tv_sec = 0;
	tv.tv_usec = 300000;
	redisSetTimeout(sub, tv);
	rep = NULL;
	CHECK(redisGetReply(sub, (void **)&rep) != REDIS_OK || !rep, "no second message");
	redisFree(sub);

	snprintf(p, sizeof(p), "/locks/%s?owner=svc", n);
	http("DELETE", p, NULL, &r);
	CHECK_ERROR(r, 409, "not_owner", "dlockd cannot release Redisson's hold");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?force=true", n);
	http("DELETE", p, NULL, &r);
	CHECK(json_bool(&r, "released") == 1, "force release frees Redisson's hold");
	http_free(&r);
}
