/* pubsub.c -- the subscriber: one thread running an event loop of its own
 * (loop.h) that owns the subscriber connection to Redis.
 *
 * The loops' waiters ask for channels through pubsub_want(), which posts
 * to this loop; per channel it keeps the set of struct waiters (one per
 * event loop) that want it, SUBSCRIBEs when the first wants it and
 * UNSUBSCRIBEs when the last stops. Subscription changes are pipelined:
 * every pending SUBSCRIBE/UNSUBSCRIBE is appended, then written in one go,
 * before the loop sleeps. A channel is live once the replies to everything
 * sent for it have come and the last was a SUBSCRIBE; then each loop that
 * wants it is told (waiters_deliver_confirmed), and a loop that asks for a
 * channel already live is told at once. Every message goes to every loop
 * that wants its channel (waiters_deliver_message); nothing here decides
 * who wakes.
 *
 * With a sentinel URL it connects to the master the resolver knows now
 * (redis_target.c), confirmed with ROLE, and a lost connection makes the
 * resolver ask the sentinels again; after a failover Sentinel closes the
 * old master's subscribers, so this reconnects to the new one.
 *
 * When the connection drops, each loop with channels is told
 * (waiters_deliver_disconnect: nothing is live), and it reconnects with
 * backoff (100 ms doubling to 1 s), subscribes every wanted channel again
 * and confirms each to its loops, which wakes their sleepers, since a
 * release may have gone unseen meanwhile. Redis refusing a SUBSCRIBE (an
 * ACL without the lock channels: Redis 7's default for a new user) says so
 * in the log, and the connection is dropped and made again after
 * REFUSED_RETRY_MS, so that no channel is left waiting for a confirmation
 * that never comes; meanwhile waiters are retried at their holders' lease
 * ends, not by messages.
 *
 * Everything but pubsub_want(), pubsub_connected() and the start/stop
 * calls runs on the subscriber's thread; the only state shared is the
 * loop's mailbox and the `connected' flag. */
#include "pubsub.h"

#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "names.h"
#include "redis_conn.h"
#include "redis_target.h"
#include "redis_url.h"
#include "util.h"
#include "waiters.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1000
#define REFUSED_RETRY_MS 5000
/* A sentinel URL: how often to look whether the master moved. */
#define MOVED_LOOK_MS 200

/* As many loops as --threads allows. */
#define MAX_LOOPS 256
#define SET_WORDS (MAX_LOOPS / 64)

/* A set of loops' waiters, by their index in struct pubsub's loops. */
struct loop_set {
	uint64_t bits[SET_WORDS];
};

struct sub_channel {
	char *name;
	struct name_entry entry;	/* in ps->channels, by name */
	struct sub_channel *dnext;	/* dirty list */
	bool dirty;			/* on the dirty list */
	bool subscribed;		/* SUBSCRIBE last sent on this connection */
	unsigned inflight;		/* (UN)SUBSCRIBE replies still to come */
	struct loop_set want;		/* the loops that want it */
};

struct pubsub {
	const struct redis_url *url;	/* not ours */
	struct loop *loop;
	pthread_t thread;
	bool started;
	atomic_bool connected;
	redisContext *ctx;
	unsigned target_gen;		/* a sentinel URL: ctx's address (redis_target) */
	struct loop_timer reconnect;
	struct loop_timer moved;	/* a sentinel URL: look for a new master */
	int64_t backoff_ms;
	struct name_table channels;	/* struct sub_channel, by name */
	struct sub_channel *dirty_head, *dirty_tail;
	struct waiters *loops[MAX_LOOPS];	/* every struct waiters heard of */
	unsigned nloops;
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

/* The index of ws in ps->loops, given one if it is new; -1 past MAX_LOOPS. */
static int loop_index(struct pubsub *ps, struct waiters *ws)
{
	for (unsigned i = 0; i < ps->nloops; i++)
		if (ps->loops[i] == ws)
			return (int)i;
	if (ps->nloops == MAX_LOOPS) {
		log_error("subscriber: more than %d loops; the others' waiters are woken "
			  "only at lease ends", MAX_LOOPS);
		return -1;
	}
	ps->loops[ps->nloops] = ws;
	return (int)ps->nloops++;
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
	c->name = xstrdup(name);
	c->entry.name = c->name;
	names_add(&ps->channels, &c->entry);
	return c;
}

/* Free c if nothing refers to it any more: no loop wants it, no
 * subscription, no reply pending, not queued for sending. */
static void channel_maybe_free(struct pubsub *ps, struct sub_channel *c)
{
	if (!set_empty(&c->want) || c->subscribed || c->inflight || c->dirty)
		return;
	names_remove(&ps->channels, &c->entry);
	free(c->name);
	free(c);
}

static bool channel_live(const struct pubsub *ps, const struct sub_channel *c)
{
	return ps->ctx && c->subscribed && c->inflight == 0;
}

static void mark_dirty(struct pubsub *ps, struct sub_channel *c)
{
	if (c->dirty)
		return;
	c->dirty = true;
	c->dnext = NULL;
	if (ps->dirty_tail)
		ps->dirty_tail->dnext = c;
	else
		ps->dirty_head = c;
	ps->dirty_tail = c;
}

/* ----- The connection ----- */

static void on_redis(struct loop *l, int fd, unsigned events, void *data);

static void disconnect(struct pubsub *ps, int64_t retry_in_ms)
{
	struct loop_set told = { { 0 } };

	if (!ps->ctx)
		return;
	log_warn("redis subscriber connection lost: %s",
		 ps->ctx->errstr[0] ? ps->ctx->errstr : "closed");
	loop_unwatch(ps->loop, ps->ctx->fd);
	redisFree(ps->ctx);
	ps->ctx = NULL;
	if (ps->target_gen)
		redis_target_lost(ps->url->target, ps->target_gen);	/* ask the sentinels */
	ps->target_gen = 0;
	atomic_store(&ps->connected, false);
	metrics_inc(METRIC_REDIS_RECONNECTS);
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
			waiters_deliver_disconnect(ps->loops[i]);
	loop_timer_set(ps->loop, &ps->reconnect, now_ms() + retry_in_ms);
}

static void on_reconnect_timer(struct loop *l, struct loop_timer *t)
{
	struct pubsub *ps = container_of(t, struct pubsub, reconnect);

	if (ps->ctx)
		return;
	ps->ctx = redis_open_blocking(ps->url, &ps->target_gen);
	if (!ps->ctx) {
		loop_timer_set(l, t, now_ms() + ps->backoff_ms);
		ps->backoff_ms = ps->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
								      : ps->backoff_ms * 2;
		return;
	}
	if (loop_watch(l, ps->ctx->fd, LOOP_READ, on_redis, ps) < 0) {
		redisFree(ps->ctx);
		ps->ctx = NULL;
		loop_timer_set(l, t, now_ms() + ps->backoff_ms);
		return;
	}
	ps->backoff_ms = BACKOFF_MIN_MS;
	atomic_store(&ps->connected, true);
	log_info("redis subscriber connected");
	/* every wanted channel is on the dirty list since the disconnect (or
	 * since it was wanted): send_changes subscribes them before we sleep */
}

/* A sentinel URL: the sentinels named another master than the one
 * subscribed to: reconnect there (and resubscribe, waking the sleepers). */
static void on_moved_timer(struct loop *l, struct loop_timer *t)
{
	struct pubsub *ps = container_of(t, struct pubsub, moved);

	if (ps->ctx && ps->target_gen && redis_target_moved(ps->url->target, ps->target_gen))
		disconnect(ps, 0);
	loop_timer_set(l, t, now_ms() + MOVED_LOOK_MS);
}

/* Before the loop sleeps: send every pending subscription change in one
 * write. */
static void send_changes(struct loop *l, void *data)
{
	struct pubsub *ps = data;
	int done = 0, queued = 0;

	(void)l;
	if (!ps->ctx)
		return;
	while (ps->dirty_head) {
		struct sub_channel *c = ps->dirty_head;
		bool want = !set_empty(&c->want);
		const char *argv[2] = { NULL, c->name };

		ps->dirty_head = c->dnext;
		if (!ps->dirty_head)
			ps->dirty_tail = NULL;
		c->dirty = false;
		if (want && !c->subscribed)
			argv[0] = "SUBSCRIBE";
		else if (!want && c->subscribed)
			argv[0] = "UNSUBSCRIBE";
		if (!argv[0]) {
			channel_maybe_free(ps, c);
			continue;
		}
		c->subscribed = want;
		c->inflight++;
		redisAppendCommandArgv(ps->ctx, 2, argv, NULL);
		queued++;
	}
	while (queued && !done) {
		if (redisBufferWrite(ps->ctx, &done) == REDIS_ERR) {
			disconnect(ps, ps->backoff_ms);
			return;
		}
	}
}

/* Redis confirmed a SUBSCRIBE or UNSUBSCRIBE of name: once none is in
 * flight and it is subscribed, every loop that wants it is told. */
static void on_confirmed(struct pubsub *ps, const char *name)
{
	struct sub_channel *c = channel_find(ps, name);

	if (!c || !c->inflight)
		return;
	c->inflight--;
	if (channel_live(ps, c)) {
		for (unsigned i = 0; i < ps->nloops; i++)
			if (set_has(&c->want, i))
				waiters_deliver_confirmed(ps->loops[i], c->name);
	}
	channel_maybe_free(ps, c);
}

static void on_message(struct pubsub *ps, const char *name, const char *payload, size_t len)
{
	struct sub_channel *c = channel_find(ps, name);

	metrics_inc(METRIC_PUBSUB_MESSAGES);
	if (!c)
		return;
	for (unsigned i = 0; i < ps->nloops; i++)
		if (set_has(&c->want, i))
			waiters_deliver_message(ps->loops[i], name, payload, len);
}

/* Handle one reply; false when Redis refused a (UN)SUBSCRIBE. */
static bool handle_reply(struct pubsub *ps, redisReply *r)
{
	const char *kind;

	if (r->type == REDIS_REPLY_ERROR) {
		log_warn("redis refused a subscription: %s; waiters are woken only at lease "
			 "ends until dlockd's redis user may use the lock channels "
			 "(allchannels or &*)", r->str);
		return false;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return true;
	kind = r->element[0]->str;
	if (!strcmp(kind, "message") && r->element[2]->type == REDIS_REPLY_STRING)
		on_message(ps, r->element[1]->str, r->element[2]->str, r->element[2]->len);
	else if (!strcmp(kind, "subscribe") || !strcmp(kind, "unsubscribe"))
		on_confirmed(ps, r->element[1]->str);
	return true;
}

static void on_redis(struct loop *l, int fd, unsigned events, void *data)
{
	struct pubsub *ps = data;
	void *reply;

	(void)l;
	(void)fd;
	(void)events;
	if (redisBufferRead(ps->ctx) == REDIS_ERR) {
		disconnect(ps, ps->backoff_ms);
		return;
	}
	for (;;) {
		if (redisGetReplyFromReader(ps->ctx, &reply) == REDIS_ERR) {
			disconnect(ps, ps->backoff_ms);
			return;
		}
		if (!reply)
			break;
		if (!handle_reply(ps, reply)) {
			freeReplyObject(reply);
			disconnect(ps, REFUSED_RETRY_MS);
			return;
		}
		freeReplyObject(reply);
	}
}

/* ----- What the loops ask ----- */

struct want_note {
	struct pubsub *ps;
	struct waiters *ws;
	bool want;
	char channel[];
};

static void run_want(struct loop *l, void *data)
{
	struct want_note *n = data;
	struct pubsub *ps = n->ps;
	int i = loop_index(ps, n->ws);
	struct sub_channel *c;

	(void)l;
	if (i < 0)
		goto out;
	c = n->want ? channel_get(ps, n->channel) : channel_find(ps, n->channel);
	if (!c)
		goto out;
	set_put(&c->want, (unsigned)i, n->want);
	if (n->want && channel_live(ps, c))
		waiters_deliver_confirmed(n->ws, c->name);	/* joins a live channel */
	else if (set_empty(&c->want) == c->subscribed)
		mark_dirty(ps, c);	/* the first wants it, or the last let go */
	else
		channel_maybe_free(ps, c);	/* else a reply to come confirms it */
out:
	free(n);
}

void pubsub_want(void *sub, struct waiters *ws, const char *channel, bool want)
{
	struct pubsub *ps = sub;
	size_t len = strlen(channel);
	struct want_note *n = xmalloc(sizeof(*n) + len + 1);

	n->ps = ps;
	n->ws = ws;
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
	if (ps->ctx) {
		loop_unwatch(ps->loop, ps->ctx->fd);
		redisFree(ps->ctx);
	}
	names_each_safe(&ps->channels, e, next) {
		struct sub_channel *c = container_of(e, struct sub_channel, entry);

		free(c->name);
		free(c);
	}
	names_release(&ps->channels);
	loop_free(ps->loop);
	free(ps);
}

struct pubsub *pubsub_start(const struct redis_url *url)
{
	struct pubsub *ps = xcalloc(1, sizeof(*ps));

	ps->url = url;
	ps->backoff_ms = BACKOFF_MIN_MS;
	names_init(&ps->channels);
	ps->loop = loop_new();
	if (!ps->loop) {
		pubsub_free(ps);
		return NULL;
	}
	loop_timer_init(&ps->reconnect, on_reconnect_timer);
	loop_timer_set(ps->loop, &ps->reconnect, now_ms());	/* connect first thing */
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
