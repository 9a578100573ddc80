/* lease.h -- a lease as dlock holds it: one lock (lease.c), or several
 * held all or none through a session of dlockd (session.c); acquiring
 * (long polls one after another), renewing, releasing, and dlock's exit
 * codes. */
#ifndef DLOCK_LEASE_H
#define DLOCK_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

/* dlock's exit codes of its own (docs/guides/shell-scripts.md, `dlock --help`); the command's
 * status otherwise, 128+N for a command killed by signal N. */
enum {
	EXIT_CONFLICT_DEFAULT = 1,	/* not acquired within --wait (-E/--conflict-exit-code) */
	EXIT_USAGE = 64,		/* bad options or arguments; dlockd said 400 */
	EXIT_UNAVAILABLE = 69,		/* dlockd unreachable, 5xx, or an answer not understood */
	EXIT_OUTPUT = 74,		/* acquire, status, list: stdout cannot be written */
	EXIT_LOST = 75,			/* the lease was lost while the command ran */
	EXIT_REFUSED = 77,		/* 401/403, or the name is another kind of lock */
	EXIT_CANNOT_EXEC = 126,		/* the command is there but cannot run */
	EXIT_NOT_FOUND = 127,		/* no such command */
};

enum lease_kind { KIND_LOCK, KIND_FAIR, KIND_READ, KIND_WRITE, KIND_SEMAPHORE };

/* What became of a request. */
enum lease_outcome {
	LEASE_OK,		/* granted, renewed, released */
	LEASE_CONFLICT,		/* held by another until the wait ended */
	LEASE_INTERRUPTED,	/* a signal came first (on the fd given) */
	LEASE_LOST,		/* not held: its lease ran out or it was force-released */
	LEASE_UNAVAILABLE,	/* no answer, a 5xx, or an answer not understood */
	LEASE_REFUSED,		/* 401, 403, wrong_kind */
	LEASE_INVALID,		/* 400: a name or value dlockd does not take */
};

struct lease;

/* The requests of a lease held some other way than one lock's: session.c's
 * for several names. As lease_acquire, lease_renew_start, lease_renewed
 * and lease_release. */
struct lease_ops {
	enum lease_outcome (*acquire)(struct lease *l, int64_t wait_ms, int sigfd);
	void (*renew_start)(struct lease *l, long timeout_ms);
	enum lease_outcome (*renewed)(struct lease *l, struct answer *a, int64_t sent_ms);
	enum lease_outcome (*release)(struct lease *l, bool quiet_not_held, bool patient);
};

struct lease {
	struct client *client;
	const struct lease_ops *ops;	/* NULL: one lock, name */
	enum lease_kind kind;
	const char *name;
	char owner[129];
	bool owner_given;	/* by the user: others may use it too (reentrant=true) */
	int64_t ttl_ms;		/* asked for, on every grant and renewal */
	bool verbose;		/* -v: say when it is granted and released */
	int limit;		/* a semaphore's permits (--limit) */
	const char *value;	/* the holder value to give with the grant; NULL: none */
	/* several names (`dlock run a,b`, ops set): taken all or none for a
	 * session, whose id becomes owner; name is their comma-separated list */
	char **names;
	size_t n_names;
	/* once granted */
	long long fencing_token;	/* several names: names[0]'s */
	char *fencing_tokens;	/* several names: "a=12,b=7", owned (free()) */
	int64_t end_ms;		/* mono_ms() by which the lease surely ends */
};

/* dlock's exit status for an outcome other than LEASE_INTERRUPTED. */
int lease_exit_code(enum lease_outcome out, int conflict_exit);
/* What an answer of dlockd means for a lock request. */
enum lease_outcome lease_outcome_of(const struct answer *a);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t mono_ms(void);
/* "lock", "fair", "read", "write", "semaphore". */
const char *lease_kind_name(enum lease_kind kind);
/* The path of l's state (GET: status, or a watch with index and wait_ms):
 * a read-write lock's both sides share one. */
void lease_status_path(const struct lease *l, char *path, size_t len);
/* The side of a read-write lock ("read", "write"); NULL for other kinds. */
const char *lease_mode_name(enum lease_kind kind);
/* A name or owner id as dlockd takes them: 1 to max of A-Z a-z 0-9 . _ : - */
bool lease_id_ok(const char *s, size_t max);
/* "dlock: <kind> '<name>': <what>" on stderr. */
void lease_say(const struct lease *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* What a user can do about an answer: for a 401, how to give a token;
 * for no answer, how to point dlock at another dlockd; else "". */
const char *lease_hint(const struct answer *a);
/* A unique owner id for this run of dlock into owner (129 bytes). */
void lease_make_owner(char *owner);

/* Take the lock, waiting up to wait_ms (-1: until it is granted) with long
 * polls one after another; a signal readable on sigfd stops it (the
 * request in flight is abandoned, which gives back a queue place, and
 * whatever it may have been granted is released). Prints why on stderr
 * unless LEASE_OK or LEASE_INTERRUPTED. */
enum lease_outcome lease_acquire(struct lease *l, int64_t wait_ms, int sigfd);
/* Renewal, in two halves so that a caller's loop goes on meanwhile: start
 * the heartbeat (sent_ms: now), then hand its answer over. LEASE_OK moves
 * end_ms on; LEASE_LOST is final; anything else is worth a retry while the
 * lease lasts. Prints why on stderr for LEASE_LOST. */
void lease_renew_start(struct lease *l, long timeout_ms);
enum lease_outcome lease_renewed(struct lease *l, struct answer *a, int64_t sent_ms);
/* Release one hold (force: whoever holds it). With patient, a failing
 * dlockd is retried for a few seconds; prints why on stderr for anything
 * but LEASE_OK and (quiet_not_held) LEASE_LOST. */
enum lease_outcome lease_release(struct lease *l, bool force, bool quiet_not_held,
				 bool patient);

/* ----- For session.c: how lease.c waits and speaks ----- */

/* The longest long poll dlock asks for: dlockd's default --max-wait-ms. */
#define LEASE_WAIT_CHUNK_MS 300000
/* What a request may take beyond the wait it asks for. */
#define LEASE_SLACK_MS 10000
/* Print what an unwelcome answer says, doing what. */
void lease_say_answer(const struct lease *l, const char *doing, const struct answer *a);
/* After a failed attempt at now (first_fail_ms: when the run of failures
 * began), how long to wait before the next; -1 when it is time to give up. */
int64_t lease_retry_in(const struct answer *a, int64_t first_fail_ms, int64_t now, int attempt);
/* Sleep up to ms, or until sigfd (if >= 0) is readable: false then. */
bool lease_pause_ms(int sigfd, int64_t ms);
/* method path (body: JSON or NULL), with patient: a failing dlockd is
 * retried for a few seconds. The last answer is in *a (answer_release). */
void lease_call_patient(const struct lease *l, const char *method, const char *path,
			const char *body, bool patient, struct answer *a);
/* DELETE path (lease_release's, or a session's): said on stderr unless
 * LEASE_OK (with -v, "released") or, quiet_not_held, LEASE_LOST. */
enum lease_outcome lease_delete(struct lease *l, const char *path, bool quiet_not_held,
				bool patient);

#endif
