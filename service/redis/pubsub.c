/* pubsub.c -- the subscriber: one thread running an event loop of its own
 * (loop.h) that owns the subscriber connection to Redis.
 *
 * The loops' waiters ask for channels through pubsub_want(), which posts
 * to this loop; per channel it keeps the set of event loops that want it, SUBSCRIBEs when the first wants it and
 * UNSUBSCRIBEs when the last stops. Subscription changes are pipelined:
 * every pending SUBSCRIBE/UNSUBSCRIBE is appended, then written in one go,
 * before the loop sleeps. A channel is live once the replies to everything
 * sent for it have come and the last was a SUBSCRIBE; then each loop that
 * wants it is told (its sink's confirmed), and a loop that asks for a
 * channel already live is told at once. Every message goes to every loop
 * that wants its channel (its sink's message); nothing here decides who
 * wakes. Each loop is registered with its sink (pubsub.h), the callbacks
 * main.c fills in: the subscriber knows nothing of what a loop does with
 * the news.
 *
 * With a sentinel URL it connects to the master the resolver knows now
 * (redis_target.c), confirmed with ROLE, and a lost connection makes the
 * resolver ask the sentinels again; after a failover Sentinel closes the
 * old master's subscribers, so this reconnects to the new one.
 *
 * When the connection drops, each loop with channels is told
 * (its sink's disconnect: nothing is live), and it reconnects with
 * backoff (100 ms doubling to 1 s), subscribes every wanted channel again
 * and confirms each to its loops, which wakes their sleepers, since a
 * release may have gone unseen meanwhile. Redis refusing a SUBSCRIBE (an
 * ACL without the lock channels: Redis 7's default for a new user) says so
 * in the log, and the connection is dropped and made again after
 * REFUSED_RETRY_MS, so that no channel is left waiting for a confirmation
 * that never comes; meanwhile waiters are retried at their holders' lease
 * ends, not by messages.
 *
 * Sharded pub/sub (--redis-pubsub: SSUBSCRIBE, "smessage", as Redisson
 * uses on a Redis 7 cluster, where a classic subscriber never hears an
 * SPUBLISH): on a single Redis it is the same one connection with the
 * sharded commands. On a cluster each channel lives on the master of its
 * slot, so there is a connection per node that has channels (struct
 * sub_conn, by the index of the node in the slot map, read with CLUSTER
 * SLOTS from any node that answers), each watched by this loop. A
 * channel's subscription is lost when its node's connection drops, when
 * the node pushes an unasked "sunsubscribe" (it gave the slot away) or
 * when a re-read map puts its slot on another node: then only that
 * channel's loops are told (their sinks' lost), the map is read again
 * (not more often than REFRESH_MIN_MS), and the channel is subscribed on
 * the node the map names and confirmed to its loops, whose sleepers retry
 * (subscribe, then retry). An error to an SSUBSCRIBE (MOVED, CLUSTERDOWN)
 * drops that node's connection the same way, after re-reading the map.
 *
 * Everything but pubsub_add_loop(), pubsub_want(), pubsub_connected() and
 * the start/stop calls runs on the subscriber's thread; the only state shared is the
 * loop's mailbox and the `connected' flag. */
#include "service/redis/pubsub.h"

#include "service/redis/cluster_slots.h"
#include "service/base/list.h"
#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/metrics.h"
#include "service/base/names.h"
#include "service/redis/redis_blocking.h"
#include "service/redis/redis_target.h"
#include "service/redis/redis_url.h"
#include "service/base/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1000
#define REFUSED_RETRY_MS 5000
/* A sentinel URL: how often to look whether the master moved. */
#define MOVED_LOOK_MS 200
/* Sharded on a cluster: the slot map is read no more often than this. */
#define REFRESH_MIN_MS 100

/* As many loops as --threads allows. */
#define MAX_LOOPS 256
#define SET_WORDS (MAX_LOOPS / 64)

/* A set of loops, by their index in struct pubsub's loops. */
struct loop_set {
	uint64_t bits[SET_WORDS];
};

struct sub_channel {
	char *name;
	struct name_entry entry;	/* in ps->channels, by name */
	struct list_node dirty;		/* in ps->dirty while a change of its
					 * subscription is still to be sent */
	int node;			/* the connection subscribed and inflight are
					 * about (-1: none yet; always 0 but on a
					 * sharded cluster) */
	bool subscribed;		/* SUBSCRIBE last sent on this connection */
	unsigned inflight;		/* (UN)SUBSCRIBE replies still to come */
	struct loop_set want;		/* the loops that want it */
};

/* A subscriber connection: the only one, or a cluster node's. */
struct sub_conn {
	struct pubsub *ps;
	int node;			/* its index in ps->conns (and the map) */
	redisContext *ctx;
	unsigned target_gen;		/* a sentinel URL: ctx's address (redis_target) */
	struct loop_timer reconnect;
	int64_t backoff_ms;
	bool queued;			/* commands appended, not yet written */
};

struct pubsub {
	const struct redis_url *url;	/* not ours */
	struct loop *loop;
	pthread_t thread;
	bool started;
	atomic_bool connected;
	bool sharded;			/* SSUBSCRIBE and "smessage" */
	bool per_node;			/* sharded on a cluster: a connection per node */
	struct sub_conn **conns;	/* per_node: by map node, NULL until used;
					 * else just conns[0] */
	size_t nconns;
	struct cluster_map map;		/* per_node */
	bool map_known;
	unsigned next_ask;		/* the node asked for the map next */
	int64_t last_refresh_ms;
	struct loop_timer refresh;	/* per_node: read the map */
	struct loop_timer moved;	/* a sentinel URL: look for a new master */
	struct name_table channels;	/* struct sub_channel, by name */
	struct list_node dirty;		/* struct sub_channel, changes to send */
	struct pubsub_sink loops[MAX_LOOPS];	/* every loop registered */
	unsigned nloops;
	uint64_t messages;		/* heard so far: numbers each */
};

/* ----- Loop sets ----- */

static bool set_has(const struct loop_set *s, unsigned i)
{
	return s->bits[i / 64] >> (i % 64) & 1;
}

static void set_put(struct loop_set *s, unsigned i, bool on)
{
	if (on)
		s->bits[i / 64] |= (uint64_t)1 << (i % 64);
	else
		s->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
}

static bool set_empty(const struct loop_set *s)
{
	for (unsigned k = 0; k < SET_WORDS; k++)
		if (s->bits[k])
			return false;
	return true;
}

/* The index in ps->loops of the loop whose sink's ctx is loop; -1 for
 * one not registered (past MAX_LOOPS). */
static int loop_index(struct pubsub *ps, const void *loop)
{
	for (unsigned i = 0; i < ps->nloops; i++)
		if (ps->loops[i].ctx == loop)
			return (int)i;
	return -1;
}

/* ----- Channel table ----- */

static struct sub_channel *channel_find(struct pubsub *ps, const char *name)
{
	struct name_entry *e = names_find(&ps->channels, name);

	return e ? container_of(e, struct sub_channel, entry) : NULL;
}

static struct sub_channel *channel_get(struct pubsub *ps, const char *name)
{
	struct sub_channel *c = channel_find(ps, name);

	if (c)
		return c;
	c = xcalloc(1, sizeof(*c));
	c->node = ps->per_node ? -1 : 0;
	c->name = xstrdup(name);
	c->entry.name = c->name;
	names_add(&ps->channels, &c->entry);
	return c;
}

/* Free c if nothing refers to it any more: no loop wants it, no
 * subscription, no reply pending, not queued for sending. */
static void channel_maybe_free(struct pubsub *ps, struct sub_channel *c)
{
	if (!set_empty(&c->want) || c->subscribed || c->inflight || list_linked(&c->dirty))
		return;
	names_remove(&ps->channels, &c->entry);
	free(c->name);
	free(c);
}

static bool channel_live(const struct pubsub *ps, const struct sub_channel *c)
{
	return c->node >= 0 && ps->conns[c->node]->ctx && c->subscribed && c->inflight == 0;
}

static void mark_dirty(struct pubsub *ps, struct sub_channel *c)
{
	if (!list_linked(&c->dirty))
		list_append(&ps->dirty, &c->dirty);
}

/* ----- The connections ----- */

static void on_redis(struct loop *l, int fd, unsigned events, void *data);
static void on_reconnect_timer(struct loop *l, struct loop_timer *t);

/* The connection of node i, made (down) if it is new. */
static struct sub_conn *conn_get(struct pubsub *ps, int i)
{
	if ((size_t)i >= ps->nconns) {
		ps->conns = xrealloc(ps->conns, (size_t)(i + 1) * sizeof(*ps->conns));
		memset(ps->conns + ps->nconns, 0, (size_t)(i + 1 - ps->nconns) * sizeof(*ps->conns));
		ps->nconns = (size_t)i + 1;
	}
	if (!ps->conns[i]) {
		struct sub_conn *cn = xcalloc(1, sizeof(*cn));

		cn->ps = ps;
		cn->node = i;
		cn->backoff_ms = BACKOFF_MIN_MS;
		loop_timer_init(&cn->reconnect, on_reconnect_timer);
		ps->conns[i] = cn;
	}
	return ps->conns[i];
}

/* Sharded on a cluster: read the slot map soon (a node went away or gave
 * a slot away), but not more often than REFRESH_MIN_MS. */
static void refresh_soon(struct pubsub *ps)
{
	int64_t at = ps->last_refresh_ms + REFRESH_MIN_MS;

	if (ps->per_node && !loop_timer_armed(&ps->refresh))
		loop_timer_set(ps->loop, &ps->refresh, at > now_ms() ? at : now_ms());
}

/* Sharded on a cluster: c's subscription is gone (its node's connection,
 * or the node no longer serves its slot): its loops are told it is not
 * live, and it is subscribed again where the map says. */
static void channel_lost(struct pubsub *ps, struct sub_channel *c)
{
	c->subscribed = false;
	c->inflight = 0;
	c->node = -1;
	for (unsigned i = 0; i < ps->nloops; i++)
		if (set_has(&c->want, i))
			ps->loops[i].lost(ps->loops[i].ctx, c->name);
	if (!set_empty(&c->want))
		mark_dirty(ps, c);
	else
		channel_maybe_free(ps, c);
}

static void disconnect(struct sub_conn *cn, int64_t retry_in_ms)
{
	struct pubsub *ps = cn->ps;
	struct loop_set told = { { 0 } };

	if (!cn->ctx)
		return;
	log_warn("redis subscriber connection lost: %s",
		 cn->ctx->errstr[0] ? cn->ctx->errstr : "closed");
	loop_unwatch(ps->loop, cn->ctx->fd);
	redisFree(cn->ctx);
	cn->ctx = NULL;
	cn->queued = false;
	if (cn->target_gen)
		redis_target_lost(ps->url->target, cn->target_gen);	/* ask the sentinels */
	cn->target_gen = 0;
	metrics_reconnect(MCONN_SUBSCRIBER);
	loop_timer_set(ps->loop, &cn->reconnect, now_ms() + retry_in_ms);
	if (ps->per_node) {
		/* its channels alone are lost; the map may have changed (a failover) */
		names_each_safe(&ps->channels, e, next) {
			struct sub_channel *c = container_of(e, struct sub_channel, entry);

			if (c->node == cn->node)
				channel_lost(ps, c);
		}
		refresh_soon(ps);
		return;
	}
	atomic_store(&ps->connected, false);
	names_each_safe(&ps->channels, e, next) {
		struct sub_channel *c = container_of(e, struct sub_channel, entry);

		c->subscribed = false;
		c->inflight = 0;
		for (unsigned k = 0; k < SET_WORDS; k++)
			told.bits[k] |= c->want.bits[k];
		if (!set_empty(&c->want))
			mark_dirty(ps, c);
		else
			channel_maybe_free(ps, c);
	}
	for (unsigned i = 0; i < ps->nloops; i++)
		if (set_has(&told, i))
			ps->loops[i].disconnect(ps->loops[i].ctx);
}

static void on_reconnect_timer(struct loop *l, struct loop_timer *t)
{
	struct sub_conn *cn = container_of(t, struct sub_conn, reconnect);
	struct pubsub *ps = cn->ps;

	if (cn->ctx)
		return;
	if (ps->per_node)
		cn->ctx = redis_open_blocking_at(ps->url, ps->map.nodes[cn->node].host,
						 ps->map.nodes[cn->node].port);
	else
		cn->ctx = redis_open_blocking(ps->url, &cn->target_gen);
	if (cn->ctx && loop_watch(l, cn->ctx->fd, LOOP_READ, on_redis, cn) < 0) {
		redisFree(cn->ctx);
		cn->ctx = NULL;
	}
	if (!cn->ctx) {
		loop_timer_set(l, t, now_ms() + cn->backoff_ms);
		cn->backoff_ms = cn->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
								      : cn->backoff_ms * 2;
		refresh_soon(ps);	/* a dead node: its slots may have moved */
		return;
	}
	cn->backoff_ms = BACKOFF_MIN_MS;
	if (ps->per_node) {
		log_info("redis subscriber connected to %s:%d", ps->map.nodes[cn->node].host,
			 ps->map.nodes[cn->node].port);
		return;
	}
	atomic_store(&ps->connected, true);
	log_info("redis subscriber connected");
	/* every wanted channel is on the dirty list since the disconnect (or
	 * since it was wanted): send_changes subscribes them before we sleep */
}

/* Sharded on a cluster: read the slot map from a node that answers, then
 * move every channel whose slot has another master now. */
static void on_refresh_timer(struct loop *l, struct loop_timer *t)
{
	struct pubsub *ps = container_of(t, struct pubsub, refresh);
	int covered = -1;

	ps->last_refresh_ms = now_ms();
	for (size_t k = 0; k < ps->map.nnodes && covered <= 0; k++) {
		unsigned i = (ps->next_ask + (unsigned)k) % (unsigned)ps->map.nnodes;
		char host[CLUSTER_HOST_MAX];
		int port = ps->map.nodes[i].port;
		redisContext *c;
		redisReply *r;

		/* the map may add nodes while reading: keep the address */
		snprintf(host, sizeof(host), "%s", ps->map.nodes[i].host);
		c = redis_open_blocking_at(ps->url, host, port);
		r = c ? redisCommand(c, "CLUSTER SLOTS") : NULL;
		covered = r ? cluster_map_read_slots(&ps->map, r, host) : -1;
		if (covered <= 0)
			ps->next_ask = i + 1;
		if (r)
			freeReplyObject(r);
		if (c)
			redisFree(c);
	}
	if (covered <= 0) {
		log_warn("redis subscriber: no node told the slot map; asking again");
		atomic_store(&ps->connected, false);
		loop_timer_set(l, t, now_ms() + BACKOFF_MAX_MS);
		return;
	}
	if (!ps->map_known)
		log_info("redis subscriber: slot map read (%zu nodes), sharded pub/sub per node",
			 ps->map.nnodes);
	ps->map_known = true;
	atomic_store(&ps->connected, true);
	names_each_safe(&ps->channels, e, next) {
		struct sub_channel *c = container_of(e, struct sub_channel, entry);

		if (c->node >= 0 &&
		    cluster_map_master(&ps->map, cluster_key_slot(c->name, strlen(c->name))) !=
			    c->node)
			channel_lost(ps, c);
	}
}

/* A sentinel URL: the sentinels named another master than the one
 * subscribed to: reconnect there (and resubscribe, waking the sleepers). */
static void on_moved_timer(struct loop *l, struct loop_timer *t)
{
	struct pubsub *ps = container_of(t, struct pubsub, moved);
	struct sub_conn *cn = ps->conns[0];

	if (cn->ctx && cn->target_gen && redis_target_moved(ps->url->target, cn->target_gen))
		disconnect(cn, 0);
	loop_timer_set(l, t, now_ms() + MOVED_LOOK_MS);
}

/* The connection c's subscription change goes to, or NULL when it must
 * wait (kept dirty): sharded on a cluster, the master of its slot, which
 * it is moved to if its subscription was elsewhere; connected first. */
static struct sub_conn *conn_for(struct pubsub *ps, struct sub_channel *c, bool want)
{
	struct sub_conn *cn;
	int m;

	if (!ps->per_node)
		return ps->conns[0];
	if (!want)	/* nothing subscribed where the node is down or unknown */
		return c->node >= 0 && ps->conns[c->node]->ctx ? ps->conns[c->node] : NULL;
	m = ps->map_known ? cluster_map_master(&ps->map, cluster_key_slot(c->name,
									   strlen(c->name)))
			  : -1;
	if (m < 0) {
		refresh_soon(ps);
		return NULL;
	}
	if (c->node != m) {
		c->subscribed = false;	/* moved: the old node dropped it */
		c->inflight = 0;
		c->node = m;
	}
	cn = conn_get(ps, m);
	if (!cn->ctx && !loop_timer_armed(&cn->reconnect))
		loop_timer_set(ps->loop, &cn->reconnect, now_ms());
	return cn->ctx ? cn : NULL;
}

/* Write what was appended to cn in one go. */
static void sub_flush(struct sub_conn *cn)
{
	int done = 0;

	cn->queued = false;
	while (!done) {
		if (redisBufferWrite(cn->ctx, &done) == REDIS_ERR) {
			disconnect(cn, cn->backoff_ms);
			return;
		}
	}
}

/* Before the loop sleeps: send every pending subscription change, one
 * write per connection. */
static void send_changes(struct loop *l, void *data)
{
	struct pubsub *ps = data;
	struct list_node later, *n;

	(void)l;
	if (!ps->per_node && !ps->conns[0]->ctx)
		return;
	list_init(&later);
	while ((n = list_pop(&ps->dirty))) {
		struct sub_channel *c = list_entry(n, struct sub_channel, dirty);
		bool want = !set_empty(&c->want);
		const char *argv[2] = { NULL, c->name };
		struct sub_conn *cn = conn_for(ps, c, want);

		if (!cn && want) {
			list_append(&later, &c->dirty);	/* waits for the map or its node */
			continue;
		}
		if (cn && want && !c->subscribed)
			argv[0] = ps->sharded ? "SSUBSCRIBE" : "SUBSCRIBE";
		else if (cn && !want && c->subscribed)
			argv[0] = ps->sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE";
		if (!argv[0]) {
			channel_maybe_free(ps, c);
			continue;
		}
		c->subscribed = want;
		c->inflight++;
		redisAppendCommandArgv(cn->ctx, 2, argv, NULL);
		cn->queued = true;
	}
	list_splice(&ps->dirty, &later);
	for (size_t i = 0; i < ps->nconns; i++)
		if (ps->conns[i] && ps->conns[i]->ctx && ps->conns[i]->queued)
			sub_flush(ps->conns[i]);
}

/* Redis confirmed a (S)SUBSCRIBE or (S)UNSUBSCRIBE of name on cn: once
 * none is in flight and it is subscribed, every loop that wants it is
 * told. An "sunsubscribe" nobody asked for is a node giving the slot
 * away: the channel is lost there. */
static void on_confirmed(struct sub_conn *cn, const char *name, bool unsub)
{
	struct pubsub *ps = cn->ps;
	struct sub_channel *c = channel_find(ps, name);

	if (!c || c->node != cn->node)
		return;
	if (!c->inflight) {
		if (unsub && c->subscribed && ps->per_node) {
			log_info("redis subscriber: %s moved away from %s:%d", name,
				 ps->map.nodes[cn->node].host, ps->map.nodes[cn->node].port);
			channel_lost(ps, c);
			refresh_soon(ps);
		}
		return;
	}
	c->inflight--;
	if (channel_live(ps, c)) {
		for (unsigned i = 0; i < ps->nloops; i++)
			if (set_has(&c->want, i))
				ps->loops[i].confirmed(ps->loops[i].ctx, c->name);
	}
	channel_maybe_free(ps, c);
}

static void on_pubsub_message(struct pubsub *ps, const char *name, const char *payload, size_t len)
{
	struct sub_channel *c = channel_find(ps, name);

	metrics_inc(METRIC_PUBSUB_MESSAGES);
	ps->messages++;
	if (!c)
		return;
	for (unsigned i = 0; i < ps->nloops; i++)
		if (set_has(&c->want, i))
			ps->loops[i].message(ps->loops[i].ctx, name, payload, len, ps->messages);
}

/* Handle one reply on cn; -1, or when Redis refused a (S)(UN)SUBSCRIBE,
 * how soon to connect again after dropping the connection. */
static int64_t handle_reply(struct sub_conn *cn, redisReply *r)
{
	struct pubsub *ps = cn->ps;
	const char *kind;
	struct cluster_node to;
	unsigned slot;

	if (r->type == REDIS_REPLY_ERROR && ps->per_node &&
	    (cluster_redirect_parse(r->str, &slot, &to) != CLUSTER_NO_REDIRECT ||
	     !strncmp(r->str, "CLUSTERDOWN", 11) || !strncmp(r->str, "TRYAGAIN", 8))) {
		/* the map was wrong: read it again and subscribe where it says */
		log_info("redis subscriber: %s:%d answered %s", ps->map.nodes[cn->node].host,
			 ps->map.nodes[cn->node].port, r->str);
		refresh_soon(ps);
		return cn->backoff_ms;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		/* the ACL's words are for an ACL's refusal (NOPERM); any other
		 * (maxclients, LOADING...) is Redis' own */
		log_warn("redis refused a subscription: %s; waiters are woken only at lease "
			 "ends until it takes one%s", r->str,
			 strncmp(r->str, "NOPERM", 6) ? "" :
			 " (dlockd's redis user must be allowed the lock channels: "
			 "allchannels or &*)");
		return REFUSED_RETRY_MS;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return -1;
	kind = r->element[0]->str + (ps->sharded && r->element[0]->str[0] == 's');
	if (!strcmp(kind, "message") && r->element[2]->type == REDIS_REPLY_STRING)
		on_pubsub_message(ps, r->element[1]->str, r->element[2]->str, r->element[2]->len);
	else if (!strcmp(kind, "subscribe") || !strcmp(kind, "unsubscribe"))
		on_confirmed(cn, r->element[1]->str, kind[0] == 'u');
	return -1;
}

static void on_redis(struct loop *l, int fd, unsigned events, void *data)
{
	struct sub_conn *cn = data;
	void *reply;
	int64_t retry;

	(void)l;
	(void)fd;
	(void)events;
	if (redisBufferRead(cn->ctx) == REDIS_ERR) {
		disconnect(cn, cn->backoff_ms);
		return;
	}
	for (;;) {
		if (redisGetReplyFromReader(cn->ctx, &reply) == REDIS_ERR) {
			disconnect(cn, cn->backoff_ms);
			return;
		}
		if (!reply)
			break;
		retry = handle_reply(cn, reply);
		freeReplyObject(reply);
		if (retry >= 0) {
			disconnect(cn, retry);
			return;
		}
	}
}

/* ----- What the loops ask ----- */

struct add_note {
	struct pubsub *ps;
	struct pubsub_sink sink;
};

static void run_add_loop(struct loop *l, void *data)
{
	struct add_note *n = data;
	struct pubsub *ps = n->ps;

	(void)l;
	if (ps->nloops == MAX_LOOPS)
		log_error("subscriber: more than %d loops; the others' waiters are woken "
			  "only at lease ends", MAX_LOOPS);
	else
		ps->loops[ps->nloops++] = n->sink;
	free(n);
}

void pubsub_add_loop(struct pubsub *ps, const struct pubsub_sink *sink)
{
	struct add_note *n = xmalloc(sizeof(*n));

	n->ps = ps;
	n->sink = *sink;
	if (loop_post(ps->loop, run_add_loop, n) < 0)
		free(n);	/* the subscriber has stopped */
}

struct want_note {
	struct pubsub *ps;
	void *loop;		/* its sink's ctx */
	bool want;
	char channel[];
};

static void run_want(struct loop *l, void *data)
{
	struct want_note *n = data;
	struct pubsub *ps = n->ps;
	int i = loop_index(ps, n->loop);
	struct sub_channel *c;

	(void)l;
	if (i < 0)
		goto out;
	c = n->want ? channel_get(ps, n->channel) : channel_find(ps, n->channel);
	if (!c)
		goto out;
	set_put(&c->want, (unsigned)i, n->want);
	if (n->want && channel_live(ps, c))	/* joins a live channel */
		ps->loops[i].confirmed(ps->loops[i].ctx, c->name);
	else if (set_empty(&c->want) == c->subscribed)
		mark_dirty(ps, c);	/* the first wants it, or the last let go */
	else
		channel_maybe_free(ps, c);	/* else a reply to come confirms it */
out:
	free(n);
}

void pubsub_want(struct pubsub *ps, void *loop, const char *channel, bool want)
{
	size_t len = strlen(channel);
	struct want_note *n = xmalloc(sizeof(*n) + len + 1);

	n->ps = ps;
	n->loop = loop;
	n->want = want;
	memcpy(n->channel, channel, len + 1);
	if (loop_post(ps->loop, run_want, n) < 0)
		free(n);	/* the subscriber has stopped */
}

bool pubsub_connected(const struct pubsub *ps)
{
	return atomic_load(&ps->connected);
}

/* ----- Set-up ----- */

static void *pubsub_main(void *arg)
{
	struct pubsub *ps = arg;

	loop_run(ps->loop);
	return NULL;
}

static void pubsub_free(struct pubsub *ps)
{
	for (size_t i = 0; i < ps->nconns; i++) {
		struct sub_conn *cn = ps->conns[i];

		if (cn && cn->ctx) {
			loop_unwatch(ps->loop, cn->ctx->fd);
			redisFree(cn->ctx);
		}
		if (cn)
			loop_timer_stop(ps->loop, &cn->reconnect);	/* its node is in the heap */
		free(cn);
	}
	free(ps->conns);
	cluster_map_release(&ps->map);
	names_each_safe(&ps->channels, e, next) {
		struct sub_channel *c = container_of(e, struct sub_channel, entry);

		free(c->name);
		free(c);
	}
	names_release(&ps->channels);
	loop_free(ps->loop);
	free(ps);
}

struct pubsub *pubsub_start(const struct redis_url *url, bool sharded)
{
	struct pubsub *ps = xcalloc(1, sizeof(*ps));

	ps->url = url;
	ps->sharded = sharded;
	ps->per_node = sharded && url->cluster;
	names_init(&ps->channels);
	list_init(&ps->dirty);
	cluster_map_init(&ps->map);
	ps->loop = loop_new();
	if (!ps->loop) {
		pubsub_free(ps);
		return NULL;
	}
	loop_timer_init(&ps->refresh, on_refresh_timer);
	if (ps->per_node) {
		/* the seeds are the map's first nodes; connections come per channel */
		for (unsigned i = 0; i < url->nseeds; i++)
			cluster_map_node(&ps->map, url->seeds[i].host, url->seeds[i].port);
		if (!url->nseeds)
			cluster_map_node(&ps->map, url->host, url->port);
		loop_timer_set(ps->loop, &ps->refresh, now_ms());
	} else {
		/* connect first thing */
		loop_timer_set(ps->loop, &conn_get(ps, 0)->reconnect, now_ms());
	}
	loop_timer_init(&ps->moved, on_moved_timer);
	if (url->target)
		loop_timer_set(ps->loop, &ps->moved, now_ms() + MOVED_LOOK_MS);
	loop_before_sleep(ps->loop, send_changes, ps);
	if (pthread_create(&ps->thread, NULL, pubsub_main, ps)) {
		log_error("cannot start the subscriber thread");
		pubsub_free(ps);
		return NULL;
	}
	ps->started = true;
	return ps;
}

void pubsub_stop(struct pubsub *ps)
{
	if (!ps)
		return;
	if (ps->started) {
		loop_stop(ps->loop);
		pthread_join(ps->thread, NULL);
	}
	pubsub_free(ps);
}
