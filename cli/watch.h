/* watch.h -- `dlock run`'s watch of the lock it holds: a long poll of the
 * lock's state on a thread of its own, which tells the supervisor (a
 * signal) each time the state changes, so that a forced release is known
 * at the next renewal, sent at once, not a third of the lease later. */
#ifndef DLOCK_WATCH_H
#define DLOCK_WATCH_H

#include "lease.h"

struct lock_watch;

/* Watch l's state from its fencing token on (l granted, one lock: not a
 * session's), with a client like l's; each change sends signo to this
 * process. NULL when it cannot start (said on stderr): the renewals are
 * what the lease rests on, so dlock goes on without it. */
struct lock_watch *lock_watch_start(const struct lease *l, int signo);
/* Stop the watch (its request abandoned) and free it; NULL is a no-op. */
void lock_watch_stop(struct lock_watch *w);

#endif
