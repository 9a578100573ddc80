/* conn_guard.h -- a deadline for each request to arrive whole, however
 * slowly its bytes trickle in (see conn_guard.c). One guard per event
 * loop, for the connections of that loop's daemon; every call on the
 * loop's thread. */
#ifndef DLOCKD_CONN_GUARD_H
#define DLOCKD_CONN_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>

struct guard;
struct guard_watch;
struct loop;

struct guard *guard_new(struct loop *l, unsigned timeout_s);
/* After the daemon stopped (every connection closed). */
void guard_free(struct guard *g);
/* From MHD's NOTIFY_CONNECTION callback: watch conn from start to close;
 * *slot (the caller's, per connection) holds the watch meanwhile. */
void guard_notify(struct guard *g, struct MHD_Connection *conn, struct guard_watch **slot,
		  enum MHD_ConnectionNotificationCode code);
/* A request on the connection of w (NULL: none) is being handled (true)
 * / was answered (false). */
void guard_busy(struct guard_watch *w, bool busy);

#endif
