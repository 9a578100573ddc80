/* server.h -- the HTTP server: one libmicrohttpd daemon on each event
 * loop, and the one way a request waits: suspended until its operation's
 * outcome resumes it. */
#ifndef DLOCKD_SERVER_H
#define DLOCKD_SERVER_H

#include "service/config/config.h"

#include <microhttpd.h>
#include <stdbool.h>

struct backend;
struct request;

/* What the server hands a request to once it is whole and checked: the
 * resources' handlers (api/handlers.h), given by whoever starts the
 * server, which names none of them. Each is called on the request's loop
 * and queues its reply, or suspends the request (server_suspend). */
struct server_handlers {
	/* a lock request (a name, or GET /locks): its name is valid, its
	 * token covers it, and the server is not stopping */
	enum MHD_Result (*lock)(struct request *rq);
	/* every other resource (/healthz, /readyz, /metrics, /openapi.yaml):
	 * no name, no token asked for */
	enum MHD_Result (*health)(struct request *rq);
	/* a session request (/sessions, /sessions/{id}...): its token is
	 * known (any token may make sessions; which it may touch is the
	 * handler's business), and the server is not stopping */
	enum MHD_Result (*session)(struct request *rq);
	/* the request is over, answered or not (toe says which): called for
	 * every request, once, before it is logged and freed */
	void (*completed)(struct request *rq, enum MHD_RequestTerminationCode toe);
};

/* Serve on cfg->listen_addr from the loops of backends[0..n), one daemon
 * each, handing requests to handlers; call before the loops run (cfg,
 * backends and handlers must outlive the server). Returns the port bound
 * (useful with port 0), or -1. */
int server_start(const struct config *cfg, const struct backend *const *backends, unsigned n,
		 const struct server_handlers *handlers);
/* Stop accepting connections (returns once no loop watches the listening
 * socket); requests in progress go on. */
void server_quiesce(void);
/* Stop the loops: each answers the requests whose operation is in flight
 * (new lock requests get 503), stops its daemon, lets the operations that
 * sent go out, and returns from loop_run(). Waiting requests must have
 * been answered first (waiters_shutdown_all). */
void server_stop(void);
/* Free the server once the loops' threads have ended; returns how many
 * requests still waited for Redis and were left to the exit (their
 * connections are not freed: libmicrohttpd aborts on a daemon stopped with
 * suspended connections). */
unsigned server_free(void);

/* The one way a request waits: its handler sent an operation and returns
 * server_suspend(rq, next); the connection is suspended (once MHD_run
 * returns) until the operation's callback calls server_resume(rq), on the
 * loop's thread; MHD then calls the handler again, which runs next. */
enum MHD_Result server_suspend(struct request *rq, enum MHD_Result (*next)(struct request *));
void server_resume(struct request *rq);

/* Has the client hung up (the socket reports EOF or an error)? A client
 * that only half-closed (shutdown(SHUT_WR)) looks the same: TCP cannot
 * tell the two apart until a write fails. */
bool server_client_gone(struct request *rq);
/* May rq's bearer token touch lock name (a name the request names in its
 * body, not its path)? Always with auth off. */
bool server_token_covers(struct request *rq, const char *name);
/* The client's socket (watched for a hang-up while a request waits), or
 * -1. */
int server_client_fd(struct request *rq);

#endif
