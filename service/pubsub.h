/* pubsub.h -- the subscriber thread: keeps Redis subscriptions in step with
 * the waiters, delivers release messages, and runs waiter timers. */
#ifndef DLOCKD_PUBSUB_H
#define DLOCKD_PUBSUB_H

#include <stdbool.h>

/* Create the notification fd; call before waiters_init(pubsub_notify). */
int pubsub_init(void);
/* Start the thread. */
int pubsub_start(void);
/* Stop the thread and close its connection. */
void pubsub_stop(void);
/* Wake the thread to look at subscription changes and timers again. */
void pubsub_notify(void);
/* Is the subscriber connection up (for /readyz)? */
bool pubsub_connected(void);

#endif
