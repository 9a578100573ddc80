/* server.h -- the HTTP server: event loops, each with a libmicrohttpd
 * daemon and a pipelined Redis connection. */
#ifndef DLOCKD_SERVER_H
#define DLOCKD_SERVER_H

#include "../service/config.h"

#include <microhttpd.h>

struct request;

/* Start serving on cfg->listen_addr; cfg must outlive the server. Returns
 * the port bound (useful with port 0), or -1. */
int server_start(const struct config *cfg);
/* Stop accepting connections; requests in progress go on. */
void server_quiesce(void);
/* rq sent a Redis call: suspend its connection (once MHD_run returns)
 * until the call's callback stores the outcome and calls server_resume();
 * MHD then runs next. */
enum MHD_Result server_await(struct request *rq, enum MHD_Result (*next)(struct request *));
/* The one suspend primitive, by the name it keeps once server_await goes. */
#define server_suspend server_await
/* Resume rq's suspended connection, from any thread: MHD calls the
 * handler again on rq's loop. */
void server_resume(struct request *rq);
/* Close every connection and join the loops. Waiting requests must have
 * been answered first (waiters_shutdown). */
void server_stop(void);

#endif
