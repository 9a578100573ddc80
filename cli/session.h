/* session.h -- several locks held all or none by one dlock, through a
 * session of dlockd: the lease's requests when it has several names. */
#ifndef DLOCK_SESSION_H
#define DLOCK_SESSION_H

#include "lease.h"

/* The lease's requests for several names (l->names): lease_acquire
 * makes a session and takes every name for it, all or none, waiting
 * without holding any (l->owner becomes the session's id); a renewal is
 * the session's heartbeat, lost when any holding is gone; the release
 * ends the session, which releases them all. */
extern const struct lease_ops session_lease_ops;

#endif
