/* conn_guard.h -- a deadline for each request to arrive whole, however
 * slowly its bytes trickle in (see conn_guard.c). */
#ifndef DLOCKD_CONN_GUARD_H
#define DLOCKD_CONN_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>

int guard_start(unsigned timeout_s);
void guard_stop(void);
/* MHD_OPTION_NOTIFY_CONNECTION callback: watch from start to close. */
void guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		  enum MHD_ConnectionNotificationCode code);
/* A request of conn is being handled (true) / was answered (false). */
void guard_busy(struct MHD_Connection *conn, bool busy);

#endif
