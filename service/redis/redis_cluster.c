/* redis_cluster.c -- the cluster router of one event loop
 * (redis_cluster.h): the slot map, one pipelined node connection
 * (redis_node.h) per node, and each command sent to the master of its
 * slot.
 *
 * The map is read with CLUSTER SLOTS from a seed (the URL's hosts, tried
 * in turn) before the first command goes out; commands that come while it
 * is being read are held, in order, and sent when it is known (or failed,
 * not sent, when no seed answers). It is read again when a node says
 * MOVED (that slot is pointed at once at the node named, so the command
 * goes there without waiting) and when a node stops answering (a failover:
 * its replica takes its slots).
 *
 * A command keeps its arguments until its final reply so that it can be
 * sent again: to the node a MOVED names (its deadline stays the one of its
 * first send, so that a call that reached Redis too late is never run
 * late), after ASKING to the node an ASK names (a slot being migrated),
 * and after RETRY_MS when the node says TRYAGAIN, LOADING or MASTERDOWN --
 * at most MAX_TRIES times and never past RETRY_WINDOW_MS after the first
 * send, then the caller gets the last error (a 503). MOVED and ASK are the
 * answer of a node that did nothing, so sending again never runs a script
 * twice. */
#include "service/redis/redis_cluster.h"

#include "service/redis/cluster_slots.h"
#include "service/base/list.h"
#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/util.h"
#include "service/redis/redis_node.h"
#include "service/redis/redis_url.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_TRIES 5
#define RETRY_MS 100
/* A command is not sent again later than this after its first send: the
 * deadline of a script (DEADLINE_MS in redis_node.c) is shorter, so a
 * retry past it would be refused as late anyway. */
#define RETRY_WINDOW_MS 1500
/* Reading the map again is asked for no more often than this. */
#define REFRESH_MIN_MS 100

/* One command on its way, with what it takes to send it again. */
struct routed {
	struct redis_cluster *rc;
	struct list_node link;		/* in held, retry or failed */
	unsigned slot;
	bool keyed;			/* slot is the command's; else any master */
	bool asking;			/* this send follows ASKING to ask_node */
	struct redis_node *sent_on;	/* the node's connection it went out on */
	int ask_node;
	int tries;
	int64_t first_ms;		/* monotonic: the first send */
	int64_t retry_at_ms;
	int64_t deadline_from;
	redis_reply_fn fn;
	void *ctx;
	int argc;
	const char *argv[REDIS_CONN_MAX_ARGS];
	size_t lens[REDIS_CONN_MAX_ARGS];
	char data[];
};

struct redis_cluster {
	struct loop *loop;
	const struct redis_url *url;
	struct cluster_map map;
	struct redis_node **conns;	/* by node index; NULL until first used */
	size_t nconns;
	unsigned next_seed;		/* the node to ask for the map next */
	size_t failed_asks;		/* nodes that gave no map in a row, before
					 * the map is known */
	bool map_known;
	bool closing;			/* redis_cluster_free() runs: send nothing */
	bool fetching;			/* a CLUSTER SLOTS is in flight */
	int64_t next_fetch_ms;		/* no refresh asked before this */
	struct list_node held;		/* struct routed, waiting for the map */
	struct list_node retry;		/* waiting for retry_at_ms, soonest first */
	struct list_node failed;	/* to be told "not sent" by fail_task */
	struct loop_task fail_task;	/* callbacks never run inside a send */
	unsigned inflight;		/* routed commands sent, not yet called back */
	struct loop_timer timer;	/* the first of retry */
	struct redis_node *answering;	/* while a caller hears its answer: the
					 * node's connection it came on */
};

/* The first command of a list of them (held, retry, failed), or the first
 * taken out of it: or NULL. */
#define routed_first(l) list_entry_or_null(list_first(l), struct routed, link)
#define routed_pop(l) list_entry_or_null(list_pop(l), struct routed, link)

/* The connection to node i, made when first needed. */
static struct redis_node *conn_of(struct redis_cluster *rc, int i)
{
	if ((size_t)i >= rc->nconns) {
		rc->conns = xrealloc(rc->conns, rc->map.nnodes * sizeof(*rc->conns));
		memset(rc->conns + rc->nconns, 0,
		       (rc->map.nnodes - rc->nconns) * sizeof(*rc->conns));
		rc->nconns = rc->map.nnodes;
	}
	if (!rc->conns[i])
		rc->conns[i] = redis_node_new_at(rc->loop, rc->url, rc->map.nodes[i].host,
						 rc->map.nodes[i].port);
	return rc->conns[i];
}

/* The slot a command is about: an EVAL's, EVALSHA's or FCALL's first key, a
 * PUBLISH's or SPUBLISH's channel. false for a command without one. */
static bool command_slot(int argc, const char **argv, const size_t *lens, unsigned *slot)
{
	int key = -1;

	if (argc >= 4 &&
	    (!strcasecmp(argv[0], "EVALSHA") || !strcasecmp(argv[0], "EVAL") ||
	     !strcasecmp(argv[0], "FCALL")) &&
	    strcmp(argv[2], "0"))
		key = 3;
	else if (argc >= 2 && (!strcasecmp(argv[0], "PUBLISH") || !strcasecmp(argv[0], "SPUBLISH")))
		key = 1;
	if (key < 0)
		return false;
	*slot = cluster_key_slot(argv[key], lens ? lens[key] : strlen(argv[key]));
	return true;
}

static void on_reply(void *arg, redisReply *r);
static void fetch_map(struct redis_cluster *rc);

/* ASKING's own reply: OK, or an error the command after it hears too. */
static void on_asking(void *arg, redisReply *r)
{
	(void)arg;
	(void)r;
}

/* Send r to the master of its slot (or the node an ASK named). */
static void dispatch(struct routed *r)
{
	struct redis_cluster *rc = r->rc;
	int node = r->asking ? r->ask_node
			     : cluster_map_master(&rc->map, r->keyed ? r->slot : 0);
	struct redis_node *c;

	if (node < 0 && !r->keyed && rc->map.nnodes)
		node = 0;
	if (node < 0) {
		/* nobody serves the slot: the map is stale or the cluster down */
		fetch_map(rc);
		list_append(&rc->failed, &r->link);
		loop_defer(rc->loop, &rc->fail_task);
		return;
	}
	c = conn_of(rc, node);
	r->sent_on = c;
	rc->inflight++;
	if (r->asking)
		redis_node_send(c, 1, (const char *[]){ "ASKING" }, NULL, 0, on_asking, NULL);
	redis_node_send(c, r->argc, r->argv, r->lens, r->deadline_from, on_reply, r);
}

static void arm_timer(struct redis_cluster *rc)
{
	struct routed *first = routed_first(&rc->retry);

	if (first)
		loop_timer_set(rc->loop, &rc->timer, first->retry_at_ms);
	else
		loop_timer_stop(rc->loop, &rc->timer);
}

static void on_retry_due(struct loop *l, struct loop_timer *t)
{
	struct redis_cluster *rc = container_of(t, struct redis_cluster, timer);
	int64_t now = now_ms();
	struct routed *r;

	(void)l;
	while ((r = routed_first(&rc->retry)) && r->retry_at_ms <= now) {
		list_remove(&r->link);
		dispatch(r);
	}
	arm_timer(rc);
}

/* Can r be sent once more? */
static bool may_retry(const struct routed *r)
{
	return r->tries < MAX_TRIES && now_ms() - r->first_ms < RETRY_WINDOW_MS;
}

/* A node's error that says "not now" without having run the command. */
static bool transient(const char *err)
{
	return !strncmp(err, "TRYAGAIN", 8) || !strncmp(err, "LOADING", 7) ||
	       !strncmp(err, "MASTERDOWN", 10);
}

/* The reply to a routed command: its final answer, or a redirection. */
static void on_reply(void *arg, redisReply *reply)
{
	struct routed *r = arg;
	struct redis_cluster *rc = r->rc;
	struct cluster_node to;
	unsigned slot;

	rc->inflight--;
	r->asking = false;
	if (rc->closing) {
		/* its connection is being freed: no resend, no map read */
	} else if (!reply || redis_reply_made_up(reply)) {
		/* no answer, or not sent (no connection to the node): the node
		 * may be gone, and a failover moves its slots */
		fetch_map(rc);
	} else if (reply->type == REDIS_REPLY_ERROR && may_retry(r)) {
		enum cluster_redirect how = cluster_redirect_parse(reply->str, &slot, &to);

		if (how != CLUSTER_NO_REDIRECT) {
			int node = cluster_map_node(&rc->map, to.host[0] ? to.host : rc->url->host,
						    to.port);

			r->tries++;
			if (how == CLUSTER_MOVED) {
				rc->map.slot_node[slot] = (int16_t)node;
				fetch_map(rc);	/* more slots may have moved with it */
			} else {
				r->asking = true;
				r->ask_node = node;
			}
			dispatch(r);
			return;
		}
		if (transient(reply->str)) {
			r->tries++;
			r->retry_at_ms = now_ms() + RETRY_MS;
			list_append(&rc->retry, &r->link);
			arm_timer(rc);
			return;
		}
	}
	rc->answering = r->sent_on;
	r->fn(r->ctx, reply);
	rc->answering = NULL;
	free(r);
}

/* ----- The slot map ----- */

/* Tell every command of l that it was not sent (none of them is on a
 * node's connection: a node's answer to any of them said it ran
 * nothing). */
static void fail_all(struct list_node *l)
{
	struct routed *r;

	while ((r = routed_pop(l))) {
		r->fn(r->ctx, redis_reply_unsent());
		free(r);
	}
}

static void on_fail_task(struct loop *l, void *data)
{
	struct redis_cluster *rc = data;

	(void)l;
	fail_all(&rc->failed);
}

static void on_slots(void *arg, redisReply *reply)
{
	struct redis_cluster *rc = arg;
	unsigned seed = rc->next_seed;
	int covered;
	struct routed *r;

	rc->fetching = false;
	if (rc->closing)
		return;
	covered = reply ? cluster_map_read_slots(&rc->map, reply, rc->map.nodes[seed].host) : -1;
	if (covered <= 0) {
		log_warn("redis cluster: no slot map from %s:%d (%s)", rc->map.nodes[seed].host,
			 rc->map.nodes[seed].port,
			 !reply ? "no answer" : redis_reply_made_up(reply) ? "not connected"
			 : reply->type == REDIS_REPLY_ERROR ? reply->str : "not CLUSTER SLOTS' reply");
		/* ask another node next: the seeds, then every master the map
		 * has named (the seeds may all be gone by now) */
		rc->next_seed = (seed + 1) % (unsigned)rc->map.nnodes;
		if (!rc->map_known && ++rc->failed_asks < rc->map.nnodes) {
			fetch_map(rc);	/* the held calls wait for the next node's answer */
			return;
		}
		rc->failed_asks = 0;
		if (!rc->map_known)
			fail_all(&rc->held);	/* no node answered: 503 */
		return;
	}
	rc->failed_asks = 0;
	if (!rc->map_known)
		log_info("redis cluster: slot map read from %s:%d, %zu nodes",
			 rc->map.nodes[seed].host, rc->map.nodes[seed].port, rc->map.nnodes);
	rc->map_known = true;
	while ((r = routed_pop(&rc->held)))
		dispatch(r);
}

/* Ask a seed for the slot map, unless that is under way or was asked for
 * a moment ago. */
static void fetch_map(struct redis_cluster *rc)
{
	int64_t now = now_ms();

	if (rc->fetching || (rc->map_known && now < rc->next_fetch_ms))
		return;
	rc->fetching = true;
	rc->next_fetch_ms = now + REFRESH_MIN_MS;
	redis_node_send(conn_of(rc, (int)rc->next_seed), 2,
			(const char *[]){ "CLUSTER", "SLOTS" }, NULL, 0, on_slots, rc);
}

/* ----- API ----- */

struct redis_cluster *redis_cluster_new(struct loop *l, const struct redis_url *url)
{
	struct redis_cluster *rc = xcalloc(1, sizeof(*rc));

	rc->loop = l;
	rc->url = url;
	list_init(&rc->held);
	list_init(&rc->retry);
	list_init(&rc->failed);
	cluster_map_init(&rc->map);
	for (unsigned i = 0; i < url->nseeds; i++)
		cluster_map_node(&rc->map, url->seeds[i].host, url->seeds[i].port);
	loop_timer_init(&rc->timer, on_retry_due);
	loop_task_init(&rc->fail_task, on_fail_task, rc);
	return rc;
}

void redis_cluster_open(struct redis_cluster *rc)
{
	LOOP_ASSERT_THREAD(rc->loop);
	if (!rc->map_known)
		fetch_map(rc);
}

void redis_cluster_send(struct redis_cluster *rc, int argc, const char **argv,
			const size_t *lens, int64_t deadline_from, redis_reply_fn fn, void *ctx)
{
	redis_cluster_send_slot(rc, -1, argc, argv, lens, deadline_from, fn, ctx);
}

void redis_cluster_send_slot(struct redis_cluster *rc, int slot, int argc, const char **argv,
			     const size_t *lens, int64_t deadline_from, redis_reply_fn fn,
			     void *ctx)
{
	size_t size = 0;
	struct routed *r;
	char *at;

	LOOP_ASSERT_THREAD(rc->loop);
	for (int i = 0; i < argc; i++)
		size += lens ? lens[i] : strlen(argv[i]);
	r = xcalloc(1, sizeof(*r) + size);
	r->rc = rc;
	if (slot >= 0 && slot < CLUSTER_SLOT_COUNT) {
		r->slot = (unsigned)slot;
		r->keyed = true;
	} else {
		r->keyed = command_slot(argc, argv, lens, &r->slot);
	}
	r->first_ms = now_ms();
	r->deadline_from = deadline_from;
	r->fn = fn;
	r->ctx = ctx;
	r->argc = argc;
	at = r->data;
	for (int i = 0; i < argc; i++) {
		size_t n = lens ? lens[i] : strlen(argv[i]);

		memcpy(at, argv[i], n);
		r->argv[i] = at;
		r->lens[i] = n;
		at += n;
	}
	if (!rc->map_known) {
		list_append(&rc->held, &r->link);
		fetch_map(rc);
		return;
	}
	dispatch(r);
}

/* The lowest slot node serves in rc's map, or CLUSTER_SLOT_COUNT. */
static unsigned lowest_slot(const struct redis_cluster *rc, int node)
{
	for (unsigned s = 0; s < CLUSTER_SLOT_COUNT; s++)
		if (rc->map.slot_node[s] == node)
			return s;
	return CLUSTER_SLOT_COUNT;
}

int redis_cluster_next_shard(const struct redis_cluster *rc, unsigned slot)
{
	int node = cluster_map_master(&rc->map, slot);
	unsigned from, best = CLUSTER_SLOT_COUNT;

	if (node < 0)
		return -1;
	from = lowest_slot(rc, node);
	/* the next master is the one whose lowest slot comes next: the first
	 * slot past from whose master's lowest slot is that slot */
	for (unsigned s = from + 1; s < CLUSTER_SLOT_COUNT && best == CLUSTER_SLOT_COUNT; s++) {
		int n = rc->map.slot_node[s];

		if (n >= 0 && n != node && lowest_slot(rc, n) == s)
			best = s;
	}
	return best < CLUSTER_SLOT_COUNT ? (int)best : -1;
}

struct redis_node *redis_cluster_answering(const struct redis_cluster *rc)
{
	return rc->answering;
}

bool redis_cluster_idle(const struct redis_cluster *rc)
{
	if (rc->inflight || !list_empty(&rc->held) || !list_empty(&rc->retry) ||
	    !list_empty(&rc->failed) || rc->fetching)
		return false;
	for (size_t i = 0; i < rc->nconns; i++)
		if (rc->conns[i] && !redis_node_idle(rc->conns[i]))
			return false;
	return true;
}

void redis_cluster_free(struct redis_cluster *rc)
{
	rc->closing = true;
	loop_timer_stop(rc->loop, &rc->timer);
	loop_cancel(rc->loop, &rc->fail_task);
	fail_all(&rc->failed);
	fail_all(&rc->retry);
	fail_all(&rc->held);
	/* each connection fails what it still has: on_reply tells the callers */
	for (size_t i = 0; i < rc->nconns; i++)
		if (rc->conns[i])
			redis_node_free(rc->conns[i]);
	free(rc->conns);
	cluster_map_release(&rc->map);
	free(rc);
}
