/* health.c -- whether a loop's backend can serve (health.h): a PING (or a
 * cluster's CLUSTER INFO) on the loop's Redis connection, for /readyz;
 * the subscriber's connection; and whether calls are in flight. */
#include "service/lock/health.h"

#include "service/base/log.h"
#include "service/base/util.h"
#include "service/lock/backend.h"
#include "service/redis/pubsub.h"
#include "service/redis/redis_conn.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

/* Whom a PING's answer is for. */
struct ping_wait {
	lock_done_fn done;
	void *ctx;
};

/* PING's answer: LOCK_OK for PONG; an error reply (LOADING, BUSY,
 * NOPERM...) is LOCK_BACKEND_DOWN with its meaning in st->fault. */
static void on_pong(void *arg, redisReply *r)
{
	struct ping_wait *c = arg;
	struct lock_state st = { 0 };
	enum lock_result res = LOCK_OK;

	if (!r || r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG")) {
		res = LOCK_BACKEND_DOWN;
		/* not sent: as no answer ("redis cannot be reached") */
		if (r && r->type == REDIS_REPLY_ERROR && r != redis_reply_unsent()) {
			st.fault = redis_error_unavailable(r->str);
			if (!st.fault)
				st.fault = "redis answered PING with an error (see dlockd's log)";
			if (!redis_reply_made_up(r))
				log_warn("readyz: redis answered PING: %s", r->str);
		}
	}
	c->done(c->ctx, res, &st);
	free(c);
}

/* A cluster's CLUSTER INFO: ready only while the cluster serves every
 * slot (cluster_state:ok); a node that answers PING in a cluster that is
 * down grants nothing. */
static void on_cluster_info(void *arg, redisReply *r)
{
	struct ping_wait *c = arg;
	struct lock_state st = { 0 };
	enum lock_result res = LOCK_OK;

	if (!r || r->type != REDIS_REPLY_STRING || !strstr(r->str, "cluster_state:ok")) {
		res = LOCK_BACKEND_DOWN;
		if (r == redis_reply_unsent())
			;	/* as no answer */
		else if (r && r->type == REDIS_REPLY_ERROR)
			st.fault = redis_error_unavailable(r->str);
		else if (r)
			st.fault = "the redis cluster is down (cluster_state is not ok)";
	}
	c->done(c->ctx, res, &st);
	free(c);
}

void health_ping(const struct backend *b, lock_done_fn done, void *ctx)
{
	struct ping_wait *c = xmalloc(sizeof(*c));

	c->done = done;
	c->ctx = ctx;
	if (redis_conn_is_cluster(b->redis))
		redis_conn_send(b->redis, 2, (const char *[]){ "CLUSTER", "INFO" }, NULL, false,
				on_cluster_info, c);
	else
		redis_conn_send(b->redis, 1, (const char *[]){ "PING" }, NULL, false, on_pong, c);
}

bool health_idle(const struct backend *b)
{
	return redis_conn_idle(b->redis);
}

bool health_subscriber_up(const struct backend *b)
{
	return pubsub_connected(b->pubsub);
}
