/* health.h -- whether a loop's backend can serve: its Redis answers
 * (readyz), its subscriber is connected, nothing is in flight (a stop
 * waits for that). */
#ifndef DLOCKD_HEALTH_H
#define DLOCKD_HEALTH_H

#include <stdbool.h>

#include "service/lock/locks.h"

struct backend;

/* Does b's Redis answer PING (a cluster: CLUSTER INFO, and its state is
 * ok)? done hears LOCK_OK, or LOCK_BACKEND_DOWN with st->fault saying what
 * Redis said (NULL: no answer), on b's loop. */
void health_ping(const struct backend *b, lock_done_fn done, void *ctx);
/* No operation is in flight on b. */
bool health_idle(const struct backend *b);
/* Is the subscriber that wakes b's waiters connected? */
bool health_subscriber_up(const struct backend *b);

#endif
