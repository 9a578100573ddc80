/* client.h -- dlock's HTTP client of dlockd: one request at a time on one
 * kept-alive connection, driven by the caller's own loop so that a signal
 * or a child's death is seen while a long poll or a heartbeat is in
 * flight. */
#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H

#include <jansson.h>
#include <stdbool.h>

struct client;

/* An answer of dlockd, or why there is none. */
struct answer {
	long status;		/* the HTTP status; 0: no answer (see error) */
	json_t *json;		/* the body, parsed; NULL if not JSON (owned) */
	int retry_after_s;	/* Retry-After; -1 if none */
	char error[256];	/* no answer: the transport's reason */
};

/* For an https:// server: the CA to trust instead of the system's, and a
 * client certificate and key for mutual TLS (each NULL: none). */
struct client_tls {
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
};

/* A client of the dlockd at server ("http://host:port", no trailing path
 * needed) sending token as a bearer token (NULL: none), with tls (NULL:
 * defaults). NULL when libcurl cannot be set up. client_free() it. */
struct client *client_create(const char *server, const char *token,
			     const struct client_tls *tls);
void client_free(struct client *c);
/* A new client of c's server, token and TLS set-up: a client serves one
 * thread. NULL when libcurl cannot be set up. */
struct client *client_clone(const struct client *c);
/* The server URL it talks to, for messages. */
const char *client_server(const struct client *c);

/* Start method on path (from "/", query included, already escaped) with
 * body (JSON; NULL: none, parameters are in the query), giving up after
 * timeout_ms. One request at a time: the previous one is finished or
 * aborted. */
void client_start(struct client *c, const char *method, const char *path, const char *body,
		  long timeout_ms);
/* Let the request progress for up to wait_ms, returning early when it is
 * done or when fd (if >= 0) is readable. True when it is done: then
 * client_finish() hands out the answer. */
bool client_poll(struct client *c, int fd, int wait_ms);
/* The finished request's answer (answer_release() it). */
void client_finish(struct client *c, struct answer *a);
/* Abandon the request in flight, if any, and its connection: dlockd sees
 * the hang-up (a waiting acquire gives up its queue place). */
void client_abort(struct client *c);
/* Start, wait (a signal on fd, if >= 0, aborts it: returns false) and
 * finish in one go. */
bool client_call(struct client *c, const char *method, const char *path, const char *body,
		 long timeout_ms, int fd, struct answer *a);

/* The "error" code of an error answer ("locked", "not_held"), or "". */
const char *answer_code(const struct answer *a);
/* Its "message", or "". */
const char *answer_message(const struct answer *a);
void answer_release(struct answer *a);

#endif
