/* pubsub.h -- the subscriber: one thread with its own event loop and its
 * own Redis connection (sharded on a cluster: one per node), keeping Redis' subscriptions equal to the channels
 * the loops' waiters need, and handing each loop the confirmations and
 * messages of its channels. */
#ifndef DLOCKD_PUBSUB_H
#define DLOCKD_PUBSUB_H

#include <stdbool.h>

struct pubsub;
struct redis_url;
struct waiters;

/* Start the subscriber thread, connecting to url (which must outlive it);
 * sharded: with SSUBSCRIBE (on a cluster, on each channel's node) instead
 * of SUBSCRIBE. NULL if the thread cannot start. */
struct pubsub *pubsub_start(const struct redis_url *url, bool sharded);
/* Stop the thread and free ps. */
void pubsub_stop(struct pubsub *ps);
/* Any thread: waiters ws needs channel (want) or no longer does; matches
 * waiters_subscribe_fn with sub = ps. */
void pubsub_want(void *ps, struct waiters *ws, const char *channel, bool want);
/* Any thread: is the subscriber connection up (for /readyz)? */
bool pubsub_connected(const struct pubsub *ps);

#endif
