/* replica_sync.c -- replica-acknowledged lock changes (--redis-sync-replicas).
 *
 * Redis replicates asynchronously: a lock granted on the master and lost
 * in a failover before a replica had it is free on the new master. As
 * Redisson does, a change is followed by WAIT <replicas> <timeout> on the
 * same connection; WAIT blocks that connection until enough replicas have
 * acknowledged every write the connection made before it, or the timeout.
 *
 * WAIT blocks the pipelined connection of the whole loop, so one WAIT
 * serves many changes: a change answered while no WAIT is in flight sends
 * one at once; changes answered while one is in flight wait for the next,
 * sent when the current one answers. Every change of a batch was answered
 * (so run by Redis) before its WAIT was sent, on the same connection, so
 * the WAIT covers it.
 *
 * A change is confirmed only by a WAIT answered on the very connection
 * that answered the change (redis_node_generation): a WAIT on a new
 * connection after a reconnect says nothing of writes made on the old one.
 * On a Redis Cluster that is the connection to the master that ran the
 * change (redis_conn_answering): each node's changes have their own WAITs,
 * batched the same way.
 *
 * auto asks for as many replicas as ROLE lists connected (at least one
 * when any is, or was on this connection: see on_role): ROLE is asked on the same connection before a WAIT when
 * the count is older than ROLE_EVERY_MS or was learnt on another
 * connection, and the WAIT is sent when ROLE has answered, so that it is
 * never judged by a stale count. With no replica, auto confirms at once
 * and sends no WAIT. */
#include "service/redis/replica_sync.h"

#include "service/base/list.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/redis/redis_conn.h"
#include "service/redis/redis_node.h"
#include "service/base/util.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* auto: how long a replica count learnt from ROLE is used. */
#define ROLE_EVERY_MS 1000
/* auto: a master without the replicas it had for this long lost them for
 * good (see on_role). */
#define NONE_FOR_GOOD_MS 10000

struct sync_entry {
	replica_sync_fn fn;
	void *ctx;
	unsigned generation;	/* of the connection that answered the change */
	struct list_node link;	/* in a node's next or current batch */
};

/* One connection's changes and WAITs: the loop's, or on a cluster one
 * node's (a WAIT covers the writes of the connection it is sent on). */
struct node_sync {
	struct replica_sync *s;
	struct redis_node *conn;
	struct list_node next;		/* struct sync_entry, answered, waiting for
					 * the next WAIT */
	struct list_node current;	/* covered by the ROLE/WAIT in flight */
	bool busy;			/* a ROLE or WAIT is in flight */
	int need;			/* replicas the WAIT in flight must reach */
	/* auto: the replica count ROLE gave, on which connection, when */
	bool role_known;
	int role_replicas;
	bool role_had_replicas;		/* ROLE listed one or more since this
					 * connection was made */
	int64_t role_none_since_ms;	/* ... and has listed none since then */
	unsigned role_generation;
	int64_t role_at_ms;
};

struct replica_sync {
	struct redis_conn *conn;	/* the loop's (a cluster's front) */
	int replicas;			/* WAIT's count, or REPLICA_SYNC_AUTO */
	char timeout[24];		/* WAIT's timeout, as an argument */
	int64_t timeout_ms;
	struct node_sync **nodes;	/* one per connection that answered a change */
	size_t nnodes;
};

struct replica_sync *replica_sync_new(struct redis_conn *conn, int replicas, int64_t timeout_ms)
{
	struct replica_sync *s = xcalloc(1, sizeof(*s));

	s->conn = conn;
	s->replicas = replicas;
	s->timeout_ms = timeout_ms;
	snprintf(s->timeout, sizeof(s->timeout), "%lld", (long long)timeout_ms);
	return s;
}

static void free_batch(struct list_node *b)
{
	struct list_node *n;

	while ((n = list_pop(b)))
		free(list_entry(n, struct sync_entry, link));
}

void replica_sync_free(struct replica_sync *s)
{
	if (!s)
		return;
	/* the connections answered every WAIT when they were freed, so
	 * nothing is left; should anything be, its callers hear nothing */
	for (size_t i = 0; i < s->nnodes; i++) {
		free_batch(&s->nodes[i]->next);
		free_batch(&s->nodes[i]->current);
		free(s->nodes[i]);
	}
	free(s->nodes);
	free(s);
}

/* The tracker of conn's changes, made when first needed. */
static struct node_sync *node_of(struct replica_sync *s, struct redis_node *conn)
{
	struct node_sync *ns;

	for (size_t i = 0; i < s->nnodes; i++)
		if (s->nodes[i]->conn == conn)
			return s->nodes[i];
	ns = xcalloc(1, sizeof(*ns));
	ns->s = s;
	ns->conn = conn;
	list_init(&ns->next);
	list_init(&ns->current);
	s->nodes = xrealloc(s->nodes, (s->nnodes + 1) * sizeof(*s->nodes));
	s->nodes[s->nnodes++] = ns;
	return ns;
}

static void start(struct node_sync *s);

/* The batch in flight is settled: tell each change whether it is
 * confirmed (a change answered on another connection than generation
 * never is), then start the next batch. */
static void finish(struct node_sync *s, bool confirmed, unsigned generation)
{
	struct list_node batch, *n;
	unsigned unconfirmed = 0;

	list_init(&batch);
	list_splice(&batch, &s->current);
	s->busy = false;
	while ((n = list_pop(&batch))) {
		struct sync_entry *e = list_entry(n, struct sync_entry, link);
		bool ok = confirmed && e->generation == generation;

		unconfirmed += !ok;
		e->fn(e->ctx, ok);
		free(e);
	}
	if (unconfirmed)
		log_warn("replication: %u lock change(s) not acknowledged by %d replica(s) "
			 "within %s ms", unconfirmed, s->need, s->s->timeout);
	if (!s->busy && !list_empty(&s->next))
		start(s);
}

static void on_wait(void *ctx, redisReply *r)
{
	struct node_sync *s = ctx;

	if (r && r->type == REDIS_REPLY_ERROR && !redis_reply_made_up(r))
		log_warn("replication: redis answered WAIT: %s", r->str);
	finish(s, r && r->type == REDIS_REPLY_INTEGER && r->integer >= s->need,
	       redis_node_generation(s->conn));
}

/* Send the WAIT for the batch in flight (none needed for 0 replicas). */
static void send_wait(struct node_sync *s)
{
	const char *argv[] = { "WAIT", NULL, s->s->timeout };
	char n[16];

	s->need = s->s->replicas != REPLICA_SYNC_AUTO ? s->s->replicas
		: s->role_replicas > 0 ? s->role_replicas
		: s->role_had_replicas ? 1 : 0;	/* they all left: see on_role */
	if (s->need == 0) {
		finish(s, true, redis_node_generation(s->conn));
		return;
	}
	snprintf(n, sizeof(n), "%d", s->need);
	argv[1] = n;
	metrics_inc(METRIC_REPLICATION_WAITS);
	redis_node_send(s->conn, 3, argv, NULL, 0, on_wait, s);
}

/* ROLE's answer on a master: {"master", offset, {{ip, port, offset}...}},
 * the replicas connected and online. */
static void on_role(void *ctx, redisReply *r)
{
	struct node_sync *s = ctx;

	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "master") ||
	    r->element[2]->type != REDIS_REPLY_ARRAY) {
		if (r && !redis_reply_made_up(r))
			log_warn("replication: ROLE did not say this redis is a master with "
				 "replicas (%s): lock changes count as unconfirmed",
				 r->type == REDIS_REPLY_ERROR ? r->str : "another answer");
		s->role_known = false;
		finish(s, false, redis_node_generation(s->conn));
		return;
	}
	/* A master that had replicas on this connection and has none now is
	 * not confirmed by none: after a Sentinel failover the old master
	 * loses its replicas (one promoted, the rest moved) and takes writes
	 * that are lost when it is demoted. At least one is asked for until
	 * one is back, the connection is made again (a new master), or
	 * NONE_FOR_GOOD_MS have passed with none (a replica removed for good:
	 * Sentinel demotes an old master it can reach within seconds). */
	if (s->role_generation != redis_node_generation(s->conn)) {
		s->role_had_replicas = false;
		s->role_none_since_ms = 0;
	}
	s->role_known = true;
	s->role_replicas = (int)r->element[2]->elements;
	if (s->role_replicas > 0) {
		s->role_had_replicas = true;
		s->role_none_since_ms = 0;
	} else if (s->role_had_replicas && !s->role_none_since_ms) {
		s->role_none_since_ms = now_ms();
	} else if (s->role_had_replicas && now_ms() - s->role_none_since_ms > NONE_FOR_GOOD_MS) {
		s->role_had_replicas = false;
		log_warn("replication: the redis master has had no replica for %d s; auto "
			 "confirms its changes at once again", NONE_FOR_GOOD_MS / 1000);
	}
	s->role_generation = redis_node_generation(s->conn);
	s->role_at_ms = now_ms();
	send_wait(s);
}

/* Put the waiting changes in flight: ROLE first if auto's count is stale. */
static void start(struct node_sync *s)
{
	list_splice(&s->current, &s->next);
	s->busy = true;
	if (s->s->replicas == REPLICA_SYNC_AUTO &&
	    (!s->role_known || s->role_generation != redis_node_generation(s->conn) ||
	     now_ms() - s->role_at_ms >= ROLE_EVERY_MS)) {
		redis_node_send(s->conn, 1, (const char *[]){ "ROLE" }, NULL, 0, on_role, s);
		return;
	}
	send_wait(s);
}

void replica_sync_after(struct replica_sync *rs, replica_sync_fn fn, void *ctx)
{
	struct node_sync *s = node_of(rs, redis_conn_answering(rs->conn));
	struct sync_entry *e = xcalloc(1, sizeof(*e));

	e->fn = fn;
	e->ctx = ctx;
	e->generation = redis_node_generation(s->conn);
	list_append(&s->next, &e->link);
	if (!s->busy)
		start(s);
}
