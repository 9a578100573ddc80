/* pubsub.h -- the subscriber: one thread with its own event loop and its
 * own Redis connection (sharded on a cluster: one per node), keeping Redis' subscriptions equal to the channels
 * the loops' waiters need, and handing each loop the confirmations and
 * messages of its channels. */
#ifndef DLOCKD_PUBSUB_H
#define DLOCKD_PUBSUB_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct pubsub;
struct redis_url;

/* How the subscriber hands one event loop the news of its channels: the
 * loop's own ctx, which also names the loop to pubsub_want(), and the
 * functions it is passed to. They are called on the subscriber's thread,
 * so each must only hand the news over to its loop (post it), never
 * wait, and never call back into the subscriber. */
struct pubsub_sink {
	void *ctx;
	/* the subscription of channel is live (again) */
	void (*confirmed)(void *ctx, const char *channel);
	/* a message on channel; seq numbers the messages the subscriber
	 * heard, the same for every loop it is handed to (so that they can
	 * share out what one message asks of them all) */
	void (*message)(void *ctx, const char *channel, const char *payload, size_t len,
			uint64_t seq);
	/* the subscriber connection was lost: no channel is live until
	 * confirmed again */
	void (*disconnect)(void *ctx);
	/* the subscription of channel alone was lost (sharded on a cluster) */
	void (*lost)(void *ctx, const char *channel);
};

/* Start the subscriber thread, connecting to url (which must outlive it);
 * sharded: with SSUBSCRIBE (on a cluster, on each channel's node) instead
 * of SUBSCRIBE. NULL if the thread cannot start. */
struct pubsub *pubsub_start(const struct redis_url *url, bool sharded);
/* Stop the thread and free ps. */
void pubsub_stop(struct pubsub *ps);
/* Any thread, before the loop's first pubsub_want() (main.c: as it builds
 * the loop): register a loop, whose channels' news ps hands to sink
 * (copied). */
void pubsub_add_loop(struct pubsub *ps, const struct pubsub_sink *sink);
/* Any thread: the loop whose sink's ctx is loop needs channel (want) or
 * no longer does. */
void pubsub_want(struct pubsub *ps, void *loop, const char *channel, bool want);
/* Any thread: is the subscriber connection up (for /readyz)? */
bool pubsub_connected(const struct pubsub *ps);

#endif
