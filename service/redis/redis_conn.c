/* redis_conn.c -- the front of an event loop's connection to Redis
 * (redis_conn.h): it owns either the connection to a single Redis
 * (redis_node.c) or, for a cluster URL, the router (redis_cluster.c), and
 * passes each call to the one it has. Nothing else: the pipelining, the
 * timeouts and the reconnects are the node connection's, the routing by
 * slot and the redirections the router's. */
#include "service/redis/redis_conn.h"

#include "service/base/util.h"
#include "service/redis/redis_cluster.h"
#include "service/redis/redis_node.h"

#include <stdlib.h>

struct redis_conn {
	struct redis_node *node;	/* a single Redis: its connection; or */
	struct redis_cluster *cluster;	/* a cluster: the router */
};

struct redis_conn *redis_conn_new(struct loop *l, const struct redis_url *url)
{
	struct redis_conn *c = xcalloc(1, sizeof(*c));

	if (url->cluster)
		c->cluster = redis_cluster_new(l, url);
	else
		c->node = redis_node_new(l, url);
	return c;
}

void redis_conn_free(struct redis_conn *c)
{
	if (!c)
		return;
	if (c->cluster)
		redis_cluster_free(c->cluster);
	else
		redis_node_free(c->node);
	free(c);
}

void redis_conn_open(struct redis_conn *c)
{
	if (c->cluster)
		redis_cluster_open(c->cluster);
	else
		redis_node_open(c->node);
}

void redis_conn_send(struct redis_conn *c, int argc, const char **argv, const size_t *lens,
		     bool deadline, redis_reply_fn fn, void *ctx)
{
	redis_conn_send_from(c, argc, argv, lens, deadline ? now_ms() : 0, fn, ctx);
}

void redis_conn_send_from(struct redis_conn *c, int argc, const char **argv,
			  const size_t *lens, int64_t deadline_from, redis_reply_fn fn,
			  void *ctx)
{
	if (argc > REDIS_CONN_MAX_ARGS)
		abort();
	if (c->cluster)
		redis_cluster_send(c->cluster, argc, argv, lens, deadline_from, fn, ctx);
	else
		redis_node_send(c->node, argc, argv, lens, deadline_from, fn, ctx);
}

struct redis_node *redis_conn_answering(struct redis_conn *c)
{
	return c->cluster ? redis_cluster_answering(c->cluster) : c->node;
}

bool redis_conn_is_cluster(const struct redis_conn *c)
{
	return c->cluster != NULL;
}

void redis_conn_send_slot(struct redis_conn *c, int slot, int argc, const char **argv,
			  const size_t *lens, redis_reply_fn fn, void *ctx)
{
	if (argc > REDIS_CONN_MAX_ARGS)
		abort();
	if (c->cluster)
		redis_cluster_send_slot(c->cluster, slot, argc, argv, lens, 0, fn, ctx);
	else
		redis_node_send(c->node, argc, argv, lens, 0, fn, ctx);
}

int redis_conn_next_shard(const struct redis_conn *c, unsigned slot)
{
	return c->cluster ? redis_cluster_next_shard(c->cluster, slot) : -1;
}

bool redis_conn_idle(const struct redis_conn *c)
{
	return c->cluster ? redis_cluster_idle(c->cluster) : redis_node_idle(c->node);
}
