/* handle_locks.c -- every lock resource: /locks/{name}, /fairlocks/{name}
 * and /rwlocks/{name}/read|write: acquire (PUT, waiting if asked), release
 * (DELETE), status (GET, waiting for a change if asked) and heartbeat (POST
 * .../heartbeat); and the listing of the locks held (GET /locks). The kind
 * comes from the route; what differs between kinds is the service's
 * business. Who may see which owner ids in a status or a listing is decided
 * here (owner_shown), from the token names the service reads.
 *
 * Every Redis call is sent without waiting: the handler suspends the
 * connection once (server_suspend) and names the function that answers
 * when it is resumed (rq->next). A release or heartbeat is one call, whose
 * outcome lock_done stores before it resumes. A status, one read or a
 * watch for a change, is run by the watch machine (service/lock/watch.h) in
 * rq->lock.watch, likewise. An acquire,
 * waiting or not, is run by the acquire machine (service/lock/acquire.h) in
 * rq->lock.acquire -- its tries, its sleeps on the lock's channel, the
 * queue place it gives back (docs/internals/architecture.md) -- while the connection
 * stays suspended; the machine's done resumes it once, and the handler
 * answers from the outcome. */
#include "api/handlers.h"

#include "api/params.h"
#include "api/reply.h"
#include "api/server.h"
#include "service/lock/acquire.h"
#include "service/lock/listing.h"
#include "service/lock/session_watch.h"
#include "service/base/log.h"
#include "service/base/metrics.h"
#include "service/base/util.h"
#include "service/lock/waiters.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----- Replies ----- */

static int retry_after_s(int64_t ttl_ms)
{
	if (ttl_ms <= 0)
		return 1;
	return (int)((ttl_ms + 999) / 1000);
}

static const char *plural(int64_t n)
{
	return n == 1 ? "" : "s";
}

/* 409 locked: say what is in the way (the script told us). */
static enum MHD_Result reply_locked(struct request *rq, const struct lock_state *st)
{
	const char *label = locks_kind_label(rq->route.kind);
	int64_t holder_ttl_ms = rq->lock.machine == LOCK_MACHINE_ACQUIRE
				? rq->lock.acquire.holder_ttl_ms : 0;
	json_t *extra = json_pack("{s:I}", "ttl_ms", (json_int_t)holder_ttl_ms);
	long long n = (long long)st->others;

	rq->retry_after_s = retry_after_s(holder_ttl_ms);
	switch (st->why) {
	case LOCK_WHY_NO_PERMIT:
		return reply_error(rq, ERR_LOCKED, extra,
				   "every permit of semaphore '%s' is out (its limit is %lld)",
				   rq->name, n);
	case LOCK_WHY_QUEUE:
		return reply_error(rq, ERR_LOCKED, extra,
				   "fair lock '%s' is free but %lld waiter%s queued for it and go%s "
				   "first", rq->name, n, n == 1 ? " is" : "s are", n == 1 ? "es" : "");
	case LOCK_WHY_WRITER_WAITING:
		return reply_error(rq, ERR_LOCKED, extra,
				   "a writer is waiting for read-write lock '%s'; new readers queue "
				   "behind it", rq->name);
	case LOCK_WHY_READERS:
		return reply_error(rq, ERR_LOCKED, extra, "read-write lock '%s' is read by %lld owner%s",
				   rq->name, n, plural(n));
	case LOCK_WHY_OTHER_READERS:
		return reply_error(rq, ERR_LOCKED, extra,
				   "read-write lock '%s' is read by %lld other owner%s as well as by "
				   "'%s'; it can be written once only '%s' reads it", rq->name, n,
				   plural(n), rq->lock.params.owner, rq->lock.params.owner);
	case LOCK_WHY_WRITER:
		return reply_error(rq, ERR_LOCKED, extra,
				   "read-write lock '%s' is written by another owner", rq->name);
	default:
		return reply_error(rq, ERR_LOCKED, extra, "%s '%s' is held by another owner", label,
				   rq->name);
	}
}

/* 409 not_owner: who holds it instead. */
static enum MHD_Result reply_not_owner(struct request *rq, const struct lock_state *st)
{
	long long n = (long long)st->others;

	switch (st->why) {
	case LOCK_WHY_READERS:
		return reply_error(rq, ERR_NOT_OWNER, NULL,
				   "write lock '%s' is not held by '%s': it is read by %lld owner%s",
				   rq->name, rq->lock.params.owner, n, plural(n));
	case LOCK_WHY_OTHER_READERS:
		return reply_error(rq, ERR_NOT_OWNER, NULL,
				   "write lock '%s' is not held by '%s', which reads it (with %lld "
				   "other owner%s)", rq->name, rq->lock.params.owner, n, plural(n));
	case LOCK_WHY_WRITER:
		return reply_error(rq, ERR_NOT_OWNER, NULL,
				   "read-write lock '%s' is written by another owner", rq->name);
	case LOCK_WHY_PRINCIPAL:
		return reply_error(rq, ERR_NOT_OWNER, NULL,
				   "%s '%s' is held by '%s' under another bearer token: only that "
				   "token may repeat, re-enter, renew or release it (an admin may "
				   "force a release)", locks_kind_label(rq->route.kind), rq->name,
				   rq->lock.params.owner);
	default:
		return reply_error(rq, ERR_NOT_OWNER, NULL, "%s '%s' is held by another owner",
				   locks_kind_label(rq->route.kind), rq->name);
	}
}

/* 409 too_many_holds: which cap a read hold would pass. The cap is the
 * setting's, the count what Redis found (Redisson's holds may pass it). */
static enum MHD_Result reply_too_many_holds(struct request *rq, const struct lock_state *st)
{
	long long n = (long long)st->others;

	if (st->why == LOCK_WHY_OWNER_HOLDS) {
		int64_t cap = rq->cfg->read_holds_per_owner;

		return reply_error(rq, ERR_TOO_MANY_HOLDS,
				   json_pack("{s:I, s:s}", "limit", (json_int_t)cap, "scope", "owner"),
				   "owner '%s' has %lld read hold%s on read-write lock '%s', the most "
				   "one owner may have (--max-read-holds-per-owner %lld): release "
				   "one first, or repeat the PUT without reentrant=true",
				   rq->lock.params.owner, n, plural(n), rq->name, (long long)cap);
	}
	int64_t cap = rq->cfg->read_holds_per_lock;

	return reply_error(rq, ERR_TOO_MANY_HOLDS,
			   json_pack("{s:I, s:s}", "limit", (json_int_t)cap, "scope", "lock"),
			   "read-write lock '%s' has %lld read hold%s, the most one lock may have "
			   "(--max-read-holds-per-lock %lld): retry once readers release theirs",
			   rq->name, n, plural(n), (long long)cap);
}

static enum MHD_Result reply_failure(struct request *rq, enum lock_result r,
				     const struct lock_state *st)
{
	const char *label = locks_kind_label(rq->route.kind);

	switch (r) {
	case LOCK_HELD:
		return reply_locked(rq, st);
	case LOCK_NOT_HELD:
		if (st->fault)
			return reply_error(rq, ERR_NOT_HELD, NULL,
					   "%s '%s' is no longer held by '%s' as far as dlockd can "
					   "count: %s", label, rq->name,
					   rq->lock.params.owner, st->fault);
		if (rq->route.kind == LOCK_KIND_SEMAPHORE)
			return reply_error(rq, ERR_NOT_HELD, NULL,
					   "'%s' holds no permit of semaphore '%s': its lease ran out "
					   "or it was released", rq->lock.params.owner, rq->name);
		if (rq->route.kind == LOCK_KIND_READ)	/* read holds are each owner's own */
			return reply_error(rq, ERR_NOT_HELD, NULL,
					   "read lock '%s' is not held by '%s': its lease ran out or "
					   "it was released", rq->name, rq->lock.params.owner);
		return reply_error(rq, ERR_NOT_HELD, NULL,
				   "%s '%s' is not held: its lease ran out or it was released",
				   label, rq->name);
	case LOCK_NOT_OWNER:
		return reply_not_owner(rq, st);
	case LOCK_WRONG_KIND:
		if (st->why == LOCK_WHY_NOT_A_LOCK)
			return reply_error(rq, ERR_WRONG_KIND, NULL,
					   "name '%s' is in use by something that is not a lock of this "
					   "kind (a semaphore's count, or data without a lease, or of "
					   "another type, under the name or one of its lock's keys); it "
					   "is left alone", rq->name);
		return reply_error(rq, ERR_WRONG_KIND, NULL,
				   "name '%s' is in use as another kind of lock", rq->name);
	case LOCK_BACKEND_DOWN:
		return reply_unavailable(rq, st->fault);
	case LOCK_SCRIPT_ERROR:
		return reply_error(rq, ERR_INTERNAL, NULL, "%s '%s': %s", label, rq->name,
				   st->fault ? st->fault : "the lock script failed in redis");
	case LOCK_UNCONFIRMED:
		/* undone: the change left nothing; else it may stand */
		return reply_error(rq, ERR_REPLICATION_UNCONFIRMED,
				   json_pack("{s:b}", "undone", st->undone), "%s '%s' %s: %s",
				   label, rq->name, st->undone ? "is not held" : "may be held",
				   st->fault);
	case LOCK_TOO_MANY_HOLDS:
		return reply_too_many_holds(rq, st);
	case LOCK_QUEUE_FULL:
		return reply_error(rq, ERR_QUEUE_FULL,
				   json_pack("{s:I}", "limit", (json_int_t)rq->cfg->fair_queue_max),
				   "%s '%s' has %lld %s, the most one lock may have "
				   "(--max-fair-queue %lld): retry later, or without wait_ms",
				   locks_kind_label(rq->route.kind), rq->name, (long long)st->others,
				   rq->route.kind == LOCK_KIND_WRITE ? "writers waiting" : "waiters queued",
				   (long long)rq->cfg->fair_queue_max);
	case LOCK_LIMIT_MISMATCH:
		return reply_error(rq, ERR_LIMIT_MISMATCH,
				   json_pack("{s:I}", "limit", (json_int_t)st->others),
				   "semaphore '%s' has limit %lld, not %lld: nothing was changed "
				   "(an admin changes it with PUT /semaphores/%s/limit)",
				   rq->name, (long long)st->others, (long long)rq->lock.params.limit,
				   rq->name);
	case LOCK_OK:
	case LOCK_RESULT_COUNT:
		break;
	}
	return reply_error(rq, ERR_INTERNAL, NULL, "unexpected lock result %d", (int)r);
}

/* ----- Waiting for Redis ----- */

/* The operation rq sent has its outcome: keep it, and let MHD call the
 * handler again (server.c runs rq->next). */
static void lock_done(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct request *rq = ctx;

	rq->lock.result = r;
	rq->lock.state = *st;
	server_resume(rq);
}

/* ----- Acquire ----- */

/* The acquire or watch machine has its outcome: let MHD call the
 * request's next (acquire_answer, status_answer). */
static void machine_done(void *ctx)
{
	server_resume(ctx);
}

static enum MHD_Result reply_shutting_down(struct request *rq)
{
	return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
			   "dlockd is shutting down; retry on another instance");
}

static enum MHD_Result reply_granted(struct request *rq, const struct lock_state *st)
{
	bool sem = rq->route.kind == LOCK_KIND_SEMAPHORE;
	const struct reply_field f[] = {
		RF_STR("name", rq->name), RF_STR("owner", rq->lock.params.owner),
		RF_INT("fencing_token", st->token), RF_INT("ttl_ms", st->ttl_ms),
		sem ? RF_INT("limit", rq->lock.params.limit) : RF_INT("holds", st->holds),
	};

	if (rq->lock.params.wait_ms > 0)
		metrics_wait(rq->route.kind, true, now_us() - rq->started_us);
	if (server_client_gone(rq))
		return MHD_NO;	/* nobody will learn of it: released on completion */
	metrics_lock(rq->route.kind, MOP_ACQUIRE, LOCK_OK);
	return reply_fields(rq, 200, f, ARRAY_SIZE(f));
}

static enum MHD_Result reply_refused(struct request *rq, enum lock_result r,
				     const struct lock_state *st)
{
	metrics_lock(rq->route.kind, MOP_ACQUIRE, r);
	if (rq->lock.params.wait_ms > 0)
		metrics_wait(rq->route.kind, false, now_us() - rq->started_us);
	return reply_failure(rq, r, st);
}

static enum MHD_Result session_record(struct request *rq);
static enum MHD_Result reply_no_session(struct request *rq);

/* A session-bound acquire no longer waits: stop hearing of its session. */
static void session_unwatch(struct request *rq)
{
	session_watch_stop(rq->lock.session_watch);
	rq->lock.session_watch = NULL;
}

/* Resumed by machine_done: answer the outcome. */
static enum MHD_Result session_unanswered(struct request *rq);

/* rq's holding, as the session's record names it (the acquire's token). */
static struct session_holding *request_holding(struct request *rq)
{
	const struct acquire *a = &rq->lock.acquire;

	rq->lock.holding = (struct session_holding){ .kind = rq->route.kind, .name = rq->name,
						     .owner = rq->lock.params.owner,
						     .token = a->state.token,
						     .repeat = !a->state.added };
	return &rq->lock.holding;
}

static enum MHD_Result refused_answer(struct request *rq)
{
	return reply_refused(rq, rq->lock.acquire.result, &rq->lock.acquire.state);
}

/* The session's record has forgotten the holding: answer the refusal. */
static void gone_forgotten(void *ctx, enum lock_result r, const struct session_info *s)
{
	(void)r;
	(void)s;
	server_resume(ctx);
}

/* An unconfirmed grant of a session whose undo left the owner no holding:
 * a repeat of a grant another request of the session recorded, and that
 * request had been refused meanwhile (lua/lock_undo.lua: the repeat's undo
 * took the holding back whole). The session must not go on listing it. */
static enum MHD_Result session_forget_gone(struct request *rq)
{
	sessions_forget(rq->backend, rq->lock.params.session, request_holding(rq), gone_forgotten,
			rq);
	return server_suspend(rq, refused_answer);
}

static enum MHD_Result acquire_answer(struct request *rq)
{
	const struct acquire *a = &rq->lock.acquire;
	bool session = rq->lock.params.given & P_SESSION;

	session_unwatch(rq);
	switch (a->outcome) {
	case ACQUIRE_GRANTED:
		if (session)
			return session_record(rq);
		return reply_granted(rq, &a->state);
	case ACQUIRE_REFUSED:
		if (session && a->result == LOCK_NOT_HELD)	/* session_ended */
			return reply_no_session(rq);
		/* no answer (it may have run): not left standing unlisted */
		if (session && a->result == LOCK_BACKEND_DOWN && !a->state.fault &&
		    !rq->lock.session_listed)
			return session_unanswered(rq);
		if (session && a->result == LOCK_UNCONFIRMED && a->state.undone && a->state.gone &&
		    !a->state.added)
			return session_forget_gone(rq);
		return reply_refused(rq, a->result, &a->state);
	case ACQUIRE_GONE:
		return MHD_NO;
	case ACQUIRE_SHUTDOWN:
		return reply_shutting_down(rq);
	case ACQUIRE_NO_OUTCOME:
		break;
	}
	return reply_error(rq, ERR_INTERNAL, NULL, "acquire of '%s' resumed without an outcome",
			   rq->name);
}

/* Start the acquire machine on what rq asks for. */
static enum MHD_Result acquire_begin(struct request *rq)
{
	struct params *p = &rq->lock.params;

	rq->lock.machine = LOCK_MACHINE_ACQUIRE;
	rq->lock.acquire = (struct acquire){
		.ops = &acquire_ops_real,
		.b = rq->backend,
		.kind = rq->route.kind,
		.name = rq->name,
		.owner = p->owner,
		.principal = rq->principal,
		.reentrant = p->reentrant,
		.ttl_ms = p->ttl_ms,
		.extras = { .limit = p->limit, .value = (p->given & P_VALUE) ? p->value : NULL,
			    .ends_ms = p->ends_ms },
		.wait_ms = p->wait_ms,
		.fd = server_client_fd(rq),
		.done = machine_done,
		.done_ctx = rq,
	};
	acquire_start(&rq->lock.acquire);
	return server_suspend(rq, acquire_answer);
}

/* ----- Acquire for a session (session=<id>) ----- */

/* How much shorter than its session's lease left (as the record reads it)
 * a grant's lease may be before it is set to the session's: the time
 * between the two reads, on a machine that is busy. */
#define SESSION_LEASE_SLACK_MS 100

/* How long a session grant's take-back is tried while Redis cannot be
 * told of it (as a multi-lock's, MULTILOCK_UNDO_MS). */
#define SESSION_TAKE_BACK_MS 10000

static enum MHD_Result reply_no_session(struct request *rq)
{
	return reply_error(rq, ERR_SESSION_NOT_FOUND, NULL,
			   "no session '%s': it never existed, was ended, or its lease ran out; "
			   "nothing was taken", rq->lock.params.session);
}

/* Does session s list the holding rq asks for? */
static bool session_lists(const struct session_info *s, const struct request *rq)
{
	for (size_t k = 0; k < s->n; k++)
		if (s->holdings[k].kind == rq->route.kind && !strcmp(s->holdings[k].name, rq->name) &&
		    !strcmp(s->holdings[k].owner, rq->lock.params.owner))
			return true;
	return false;
}

/* The session's read or record is in: its lease left in ttl_ms. */
static void session_step_done(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct request *rq = ctx;

	rq->lock.result = r;
	if (r == LOCK_OK && rq->lock.machine == LOCK_MACHINE_NONE)	/* the read */
		rq->lock.session_listed = session_lists(s, rq);
	if (r == LOCK_OK)
		rq->lock.params.ttl_ms = s->lease_ms;
	if (r == LOCK_OK && s->ends_ms)	/* the read's, or the record's */
		rq->lock.params.ends_ms = s->ends_ms;
	else if (r == LOCK_TOO_MANY_HOLDS)
		rq->lock.state.others = s->cap_n;
	server_resume(rq);
}

/* The session of a waiting acquire ended (DELETE, or its lease ran out,
 * heard by any dlockd instance): the acquire stops waiting at once, gives
 * back its queue place and is answered 404 session_not_found. */
static void session_ended(void *ctx)
{
	struct request *rq = ctx;

	session_unwatch(rq);
	if (rq->lock.machine == LOCK_MACHINE_ACQUIRE)
		acquire_cancel(&rq->lock.acquire, LOCK_NOT_HELD);
}

/* The session of a waiting acquire was read alive: its tries from now on
 * ask the lease (and end) read, which a heartbeat may have moved since
 * the read before the wait. */
static void session_renewed(void *ctx, int64_t lease_ms, int64_t ends_ms)
{
	struct request *rq = ctx;

	if (lease_ms < 1)
		return;
	rq->lock.params.ttl_ms = lease_ms;
	if (ends_ms)
		rq->lock.params.ends_ms = ends_ms;
	if (rq->lock.machine == LOCK_MACHINE_ACQUIRE)
		acquire_set_lease(&rq->lock.acquire, lease_ms, rq->lock.params.ends_ms);
}

/* Resumed after the session was read: take the lock with its lease left,
 * so the holding never outlives the session; one that may wait hears
 * when the session ends. */
static enum MHD_Result session_read_answer(struct request *rq)
{
	if (rq->lock.result == LOCK_NOT_HELD ||
	    (rq->lock.result == LOCK_OK && rq->lock.params.ttl_ms < 1))
		return reply_no_session(rq);
	if (rq->lock.result != LOCK_OK)
		return reply_failure(rq, rq->lock.result, &rq->lock.state);
	if (rq->lock.params.wait_ms > 0)
		rq->lock.session_watch = session_watch_start(rq->backend, rq->lock.params.session,
							     rq->lock.params.ttl_ms, session_ended,
							     session_renewed, rq);
	return acquire_begin(rq);
}

/* Resumed after a waited grant's lease was set to the session's. The
 * grant is made and recorded in the session already: a renewal Redis did
 * not serve (not sent, too late, no answer) leaves it standing with the
 * lease it was granted (the session's when the wait last heard of it,
 * which the session's next heartbeat lengthens as any of its holdings),
 * so that is what is answered -- never a 503 that says nothing changed.
 * A renewal that found the holding gone is answered as such. */
static enum MHD_Result session_renew_answer(struct request *rq)
{
	struct acquire *a = &rq->lock.acquire;

	if (rq->lock.result == LOCK_BACKEND_DOWN)
		return reply_granted(rq, &a->state);
	if (rq->lock.result != LOCK_OK)
		return reply_failure(rq, rq->lock.result, &rq->lock.state);
	a->state.ttl_ms = rq->lock.state.ttl_ms;
	return reply_granted(rq, &a->state);
}

/* Resumed after the grant was recorded in the session; when it was not,
 * the grant is released again and nothing is held. A grant that waited
 * was taken with the session's lease left when the wait began, and one
 * that did not may have been taken just before a heartbeat renewed the
 * session: its lease is set to the session's now (ttl_ms, from the
 * record), so it ends with the session, no later and no sooner. */
static void session_grant_undone(void *ctx, enum lock_result r, const struct lock_state *st);
static enum MHD_Result session_unrecorded_answer(struct request *rq);

static enum MHD_Result session_not_owner_answer(struct request *rq)
{
	return reply_error(rq, ERR_NOT_OWNER, NULL,
			   "owner '%s' holds %s '%s' already, outside session '%s' (another "
			   "session, none, or a request of this session not answered yet): a "
			   "session's holdings are its own; give another owner, or none (the "
			   "session id)", rq->lock.params.owner, locks_kind_label(rq->route.kind),
			   rq->name, rq->lock.params.session);
}

/* The repeat of a holding the session does not list is put back (its
 * lease, and its number: a grant of this session not answered yet may
 * then still be taken back by its own request), whatever the undo says:
 * the answer is not_owner either way. */
static void session_repeat_undone(void *ctx, enum lock_result r, const struct lock_state *st)
{
	(void)r;
	(void)st;
	server_resume(ctx);
}

static enum MHD_Result session_record_answer(struct request *rq)
{
	const struct acquire *a = &rq->lock.acquire;
	enum lock_result r = rq->lock.result;

	/* a grant that waited, or whose session a heartbeat renewed between
	 * the read of its lease left and the grant: its lease is set to the
	 * session's, or it would end before the session does */
	if (r == LOCK_OK && (rq->lock.params.wait_ms > 0 ||
			     rq->lock.params.ttl_ms > a->state.ttl_ms + SESSION_LEASE_SLACK_MS)) {
		locks_renew(rq->backend, rq->route.kind, rq->name, rq->lock.params.owner,
			    rq->principal, rq->lock.params.ttl_ms, rq->lock.params.ends_ms,
			    lock_done, rq);
		return server_suspend(rq, session_renew_answer);
	}
	if (r == LOCK_OK)
		return reply_granted(rq, &a->state);
	if (r == LOCK_NOT_OWNER && !a->state.added && a->state.change) {
		/* a repeat of a holding that is not this session's */
		locks_undo(rq->backend, rq->route.kind, rq->name, rq->lock.params.owner,
			   a->state.change, session_repeat_undone, rq);
		return server_suspend(rq, session_not_owner_answer);
	}
	if (r == LOCK_NOT_OWNER)
		return session_not_owner_answer(rq);
	if (a->state.added) {	/* a hold this request added: give it back first */
		locks_undo(rq->backend, rq->route.kind, rq->name, rq->lock.params.owner,
			   a->state.change, session_grant_undone, rq);
		return server_suspend(rq, session_unrecorded_answer);
	}
	return session_unrecorded_answer(rq);
}

/* The grant this request added is taken back, or could not be (Redis not
 * told within the undo's patience): in a->state.undone. */
static void session_grant_undone(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct request *rq = ctx;

	rq->lock.acquire.state.undone = r == LOCK_OK && st->undone;
	server_resume(rq);
}

/* Why the session did not record the grant (rq->lock.result), once what
 * the request added is taken back -- or, if it could not be, that it may
 * stand: a 503 that says nothing changed must not be one that did. */
static enum MHD_Result session_unrecorded_answer(struct request *rq)
{
	const struct acquire *a = &rq->lock.acquire;
	enum lock_result r = rq->lock.result;

	if (a->state.added && !a->state.undone)
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, json_pack("{s:b}", "undone", 0),
				   "%s '%s' was granted to '%s', but session '%s' could not "
				   "record it (%s), and it was not taken back (redis could not be "
				   "told, or a later call of the owner changed it): it may stay "
				   "held until its lease ends, or a release by its owner",
				   locks_kind_label(rq->route.kind), rq->name,
				   rq->lock.params.owner, rq->lock.params.session,
				   r == LOCK_NOT_HELD ? "it ended" :
				   r == LOCK_TOO_MANY_HOLDS ? "it is full" :
				   rq->lock.state.fault ? rq->lock.state.fault : "redis did not answer");
	if (r == LOCK_NOT_HELD)
		return reply_no_session(rq);
	if (r == LOCK_TOO_MANY_HOLDS)
		return reply_error(rq, ERR_SESSION_FULL, json_pack("{s:I}", "limit",
				   (json_int_t)rq->cfg->session_holdings_max), "session '%s' has "
				   "%lld holdings, the most one may have (--max-session-holdings); "
				   "nothing was taken", rq->lock.params.session,
				   (long long)rq->lock.state.others);
	return reply_failure(rq, r, &rq->lock.state);
}

/* A session's acquire Redis did not answer: it may have run, and a
 * holding it made would stand unlisted in the session (its end would not
 * free it; a repeat would be refused as held outside the session). Owned
 * by the session's id, it is released before the 503; another owner may
 * hold it from before, outside the session, so that is not released, and
 * the 503 says it may stand. */
static void session_grant_released(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct request *rq = ctx;

	(void)st;
	rq->lock.acquire.state.undone = r == LOCK_OK || r == LOCK_NOT_HELD;
	server_resume(rq);
}

static enum MHD_Result session_unanswered_answer(struct request *rq)
{
	const struct acquire *a = &rq->lock.acquire;

	if (a->state.undone)
		return reply_refused(rq, a->result, &a->state);
	return reply_error(rq, ERR_BACKEND_UNAVAILABLE, json_pack("{s:b}", "undone", 0),
			   "redis did not answer the acquire of %s '%s' for session '%s': it may "
			   "have been granted to '%s', not recorded in the session, and %s: it "
			   "may stay held until its lease ends, or a release by its owner",
			   locks_kind_label(rq->route.kind), rq->name, rq->lock.params.session,
			   rq->lock.params.owner,
			   strcmp(rq->lock.params.owner, rq->lock.params.session) ?
			   "is not released (that owner may hold it from before)" :
			   "could not be released");
}

static enum MHD_Result session_unanswered(struct request *rq)
{
	struct acquire *a = &rq->lock.acquire;

	a->state.undone = false;
	if (strcmp(rq->lock.params.owner, rq->lock.params.session))
		return session_unanswered_answer(rq);
	locks_release_patient(rq->backend, rq->route.kind, rq->name, rq->lock.params.owner,
			      rq->principal, SESSION_TAKE_BACK_MS, session_grant_released, rq);
	return server_suspend(rq, session_unanswered_answer);
}

/* A grant for a session: record it there before answering. */
static enum MHD_Result session_record(struct request *rq)
{
	sessions_record(rq->backend, rq->lock.params.session, request_holding(rq),
			rq->cfg->session_holdings_max, session_step_done, rq);
	return server_suspend(rq, session_record_answer);
}

/* ----- A live session's id as a plain owner ----- */

/* An acquire or heartbeat without session= whose owner is a live
 * session's id would take, repeat, re-enter or renew that session's
 * holding outside it: a repeat with a longer ttl_ms kept the lock past the
 * session's end, a re-entry kept it after DELETE /sessions/{id} said it
 * was released (found by a probe). Such an owner (one shaped as a session
 * id: 32 lowercase hex digits) is looked up first, and refused while its
 * session lives; a release (DELETE /locks/{name}?owner=<id>) is not. */
static bool owner_may_be_session(const struct request *rq)
{
	const struct params *p = &rq->lock.params;

	return (p->given & P_OWNER) && sessions_id_shaped(p->owner, strlen(p->owner));
}

static void owner_session_read(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct request *rq = ctx;

	rq->lock.result = r;
	if (r == LOCK_BACKEND_DOWN && s)
		rq->lock.state.fault = s->fault;
	server_resume(rq);
}

/* Resumed after the owner's session was looked up: rq goes on with go
 * unless it lives. */
static enum MHD_Result owner_session_checked(struct request *rq,
					     enum MHD_Result (*go)(struct request *))
{
	if (rq->lock.result == LOCK_OK)
		return reply_error(rq, ERR_NOT_OWNER, NULL,
				   "owner '%s' is a live session's id: its holdings are the "
				   "session's, taken with session=%s and renewed by the session's "
				   "heartbeat, never on their own (a release with owner=%s may "
				   "still give one back)", rq->lock.params.owner,
				   rq->lock.params.owner, rq->lock.params.owner);
	if (rq->lock.result != LOCK_NOT_HELD)
		return reply_failure(rq, rq->lock.result, &rq->lock.state);
	rq->lock.result = LOCK_OK;
	return go(rq);
}

static enum MHD_Result owner_session_lookup(struct request *rq,
					    enum MHD_Result (*then)(struct request *))
{
	sessions_read(rq->backend, rq->lock.params.owner, rq->principal, owner_session_read, rq);
	return server_suspend(rq, then);
}

static enum MHD_Result plain_put_checked(struct request *rq)
{
	return owner_session_checked(rq, acquire_begin);
}

static enum MHD_Result put_lock(struct request *rq)
{
	struct params *p = &rq->lock.params;
	bool sem = rq->route.kind == LOCK_KIND_SEMAPHORE;

	if (params_or_reply(rq, P_OWNER | P_TTL | P_WAIT | P_VALUE | P_SESSION |
			    (sem ? P_LIMIT : P_REENTRANT)) < 0)
		return MHD_YES;
	if (sem && !(p->given & P_LIMIT))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "limit is required: the number of permits of semaphore '%s' "
				   "(1..%d)", rq->name, LOCKS_SEMAPHORE_LIMIT_MAX);
	if (p->given & P_SESSION) {
		if (p->given & P_TTL)
			return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
					   "give either session or ttl_ms, not both: a session's "
					   "holding lives as long as the session");
		if (p->reentrant)
			return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
					   "reentrant=true is not for a session: a session holds a "
					   "lock once, and ending it releases the holding whole");
		if (!(p->given & P_OWNER))
			memcpy(p->owner, p->session, sizeof(p->session));
		sessions_read(rq->backend, p->session, rq->principal, session_step_done, rq);
		return server_suspend(rq, session_read_answer);
	}
	if (!(p->given & P_OWNER)) {
		/* in capitals: never shaped as a session id, so that its
		 * heartbeats are not looked up as one (owner_may_be_session) */
		random_hex(p->owner, 16);
		for (char *c = p->owner; *c; c++)
			*c = (char)toupper((unsigned char)*c);
	}
	if (!(p->given & P_TTL))
		p->ttl_ms = rq->cfg->default_ttl_ms;
	if (owner_may_be_session(rq))
		return owner_session_lookup(rq, plain_put_checked);
	return acquire_begin(rq);
}

void handle_lock_completed(struct request *rq, enum MHD_RequestTerminationCode toe)
{
	bool delivered = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;

	if (rq->lock.machine == LOCK_MACHINE_WATCH)
		watch_end(&rq->lock.watch);
	session_unwatch(rq);
	session_locks_end(rq, delivered);
	if (rq->lock.machine == LOCK_MACHINE_ACQUIRE && acquire_end(&rq->lock.acquire, delivered)) {
		metrics_lock(rq->route.kind, MOP_ACQUIRE, HANDLE_ABANDONED);
		log_info("answer to the grant of %s '%s' was not delivered; taking it back",
			 locks_kind_label(rq->route.kind), rq->name);
	}
}

/* ----- Release, heartbeat, status ----- */

static enum MHD_Result force_released(struct request *rq)
{
	metrics_lock(rq->route.kind, MOP_FORCE_RELEASE, rq->lock.result);
	if (rq->lock.result != LOCK_OK)
		return reply_failure(rq, rq->lock.result, &rq->lock.state);
	return reply_fields(rq, 200, &RF_BOOL("released", rq->lock.state.locked), 1);
}

static enum MHD_Result released(struct request *rq)
{
	metrics_lock(rq->route.kind, MOP_RELEASE, rq->lock.result);
	if (rq->lock.result == LOCK_NOT_HELD)	/* the lease had run out */
		metrics_expiration(rq->route.kind);
	if (rq->lock.result != LOCK_OK)
		return reply_failure(rq, rq->lock.result, &rq->lock.state);
	return reply_fields(rq, 200, (const struct reply_field[]){
				    RF_BOOL("released", !rq->lock.state.locked),
				    RF_INT("holds", rq->lock.state.holds) }, 2);
}

static enum MHD_Result delete_lock(struct request *rq)
{
	bool force;

	if (params_or_reply(rq, P_OWNER | P_FORCE) < 0)
		return MHD_YES;
	force = rq->lock.params.force;
	if (force && (rq->lock.params.given & P_OWNER))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "give either owner or force=true, not both");
	if (!force && !(rq->lock.params.given & P_OWNER))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "owner is required to release a lock (or force=true)");
	if (force && !rq->admin)
		return reply_error(rq, ERR_FORBIDDEN, NULL,
				   "only an admin token may force a release");
	if (force) {
		locks_force_release(rq->backend, rq->route.kind, rq->name, lock_done, rq);
		return server_suspend(rq, force_released);
	}
	locks_release(rq->backend, rq->route.kind, rq->name, rq->lock.params.owner, rq->principal,
		      lock_done, rq);
	return server_suspend(rq, released);
}

static enum MHD_Result renewed(struct request *rq)
{
	metrics_lock(rq->route.kind, MOP_HEARTBEAT, rq->lock.result);
	if (rq->lock.result == LOCK_NOT_HELD)	/* the lease had run out */
		metrics_expiration(rq->route.kind);
	if (rq->lock.result != LOCK_OK)
		return reply_failure(rq, rq->lock.result, &rq->lock.state);
	return reply_fields(rq, 200, &RF_INT("ttl_ms", rq->lock.state.ttl_ms), 1);
}

static enum MHD_Result renew_begin(struct request *rq)
{
	locks_renew(rq->backend, rq->route.kind, rq->name, rq->lock.params.owner, rq->principal,
		    rq->lock.params.ttl_ms, 0, lock_done, rq);
	return server_suspend(rq, renewed);
}

static enum MHD_Result heartbeat_checked(struct request *rq)
{
	return owner_session_checked(rq, renew_begin);
}

static enum MHD_Result post_heartbeat(struct request *rq)
{
	if (params_or_reply(rq, P_OWNER | P_TTL) < 0)
		return MHD_YES;
	if (!(rq->lock.params.given & P_OWNER))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "owner is required to renew a lease");
	if (!(rq->lock.params.given & P_TTL))
		rq->lock.params.ttl_ms = rq->cfg->default_ttl_ms;
	if (owner_may_be_session(rq))
		return owner_session_lookup(rq, heartbeat_checked);
	return renew_begin(rq);
}

static bool is_rw(const struct request *rq)
{
	return rq->route.kind == LOCK_KIND_READ || rq->route.kind == LOCK_KIND_WRITE;
}

/* May rq see the owner id of a holding made under principal (NULL: none
 * recorded)? With auth off or an admin token, always; a client token, only
 * for holdings made under its own name (README, "Inspecting a lock"). */
static bool owner_shown(const struct request *rq, const char *principal)
{
	return rq->admin || (principal && rq->principal[0] && !strcmp(principal, rq->principal));
}

static json_t *holding_json(const struct request *rq, const struct lock_holding *h)
{
	json_t *o = json_object();

	if (owner_shown(rq, h->principal))
		json_object_set_new(o, "owner", json_string(h->owner));
	if (h->side != LOCK_MODE_NONE)
		json_object_set_new(o, "side",
				    json_string(h->side == LOCK_MODE_WRITE ? "write" : "read"));
	json_object_set_new(o, "holds", json_integer(h->holds));
	if (h->token > 0)
		json_object_set_new(o, "fencing_token", json_integer(h->token));
	json_object_set_new(o, "ttl_ms", json_integer(h->ttl_ms));
	if (h->value && owner_shown(rq, h->principal))
		json_object_set_new(o, "value", json_string(h->value));
	return o;
}

/* A fair lock's queue: the first places, in order; the owners queued are
 * an admin's to see (places keep no token name). */
static void queue_json(const struct request *rq, json_t *body, const struct lock_view *v)
{
	json_t *queue = json_array();

	for (size_t i = 0; i < v->nplaces; i++) {
		json_t *o = json_object();

		if (rq->admin)
			json_object_set_new(o, "owner", json_string(v->places[i].owner));
		json_object_set_new(o, "ttl_ms", json_integer(v->places[i].ttl_ms));
		json_array_append_new(queue, o);
	}
	json_object_set_new(body, "queue", queue);
	json_object_set_new(body, "queue_length", json_integer(v->queued));
}

static json_t *status_json(const struct request *rq, const struct lock_view *v)
{
	static const char *const modes[] = { "none", "read", "write" };
	const struct params *p = &rq->lock.params;
	json_t *body, *holders = json_array();
	int64_t readers = 0;

	body = json_pack("{s:s, s:b, s:I}", "name", rq->name, "locked", v->locked, "ttl_ms",
			 (json_int_t)v->ttl_ms);
	for (size_t i = 0; i < v->nholders; i++) {
		json_array_append_new(holders, holding_json(rq, &v->holders[i]));
		readers += v->holders[i].side == LOCK_MODE_READ;
	}
	if (is_rw(rq)) {
		json_object_set_new(body, "mode", json_string(modes[v->mode]));
		json_object_set_new(body, "readers", json_integer(readers));
	} else if (p->given & P_OWNER) {
		const struct lock_holding *h = lock_view_holding(v, p->owner, LOCK_MODE_NONE);

		json_object_set_new(body, "holds", json_integer(h ? h->holds : 0));
		json_object_set_new(body, "held", json_boolean(h != NULL));
	}
	json_object_set_new(body, "index", json_integer(v->index));
	if (p->given & P_INDEX)
		json_object_set_new(body, "changed", json_boolean(rq->lock.watch.changed));
	json_object_set_new(body, "holders", holders);
	if (rq->route.kind == LOCK_KIND_FAIR)
		queue_json(rq, body, v);
	return body;
}

/* A semaphore's status: limit, available, holders (with values; a
 * Redisson permit's id in hex as "permit"), waiting. */
static json_t *semaphore_json(const struct request *rq, const struct lock_view *v)
{
	const struct params *p = &rq->lock.params;
	json_t *body, *holders = json_array();

	for (size_t i = 0; i < v->nholders; i++) {
		const struct lock_holding *h = &v->holders[i];
		json_t *o = json_object();

		if (h->foreign)
			json_object_set_new(o, "permit", json_string(h->owner));
		else if (owner_shown(rq, h->principal))
			json_object_set_new(o, "owner", json_string(h->owner));
		if (h->token > 0)
			json_object_set_new(o, "fencing_token", json_integer(h->token));
		json_object_set_new(o, "ttl_ms", json_integer(h->ttl_ms));
		if (h->value && (owner_shown(rq, h->principal) || h->foreign))
			json_object_set_new(o, "value", json_string(h->value));
		json_array_append_new(holders, o);
	}
	body = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I}", "name", rq->name, "locked", v->locked,
			 "limit", (json_int_t)v->limit, "available", (json_int_t)v->available,
			 "held", (json_int_t)v->out, "waiting", (json_int_t)v->waiting);
	if (p->given & P_OWNER) {
		bool held = v->asked_held || lock_view_holding(v, p->owner, LOCK_MODE_NONE);

		json_object_set_new(body, "holds", json_integer(held ? 1 : 0));
		json_object_set_new(body, "held_by_owner", json_boolean(held));
	}
	json_object_set_new(body, "index", json_integer(v->index));
	if (p->given & P_INDEX)
		json_object_set_new(body, "changed", json_boolean(rq->lock.watch.changed));
	json_object_set_new(body, "holders", holders);
	return body;
}

/* A status body, kept with the view it shows as the view's memo
 * (lock_view.h) and sent by every answer that shows that view the same
 * way: the watches of one change share one view (watch.c), so their
 * thousands of answers are rendered and encoded once, not once each. */
struct view_body {
	unsigned refs;		/* the memo's, and one per response sending it */
	size_t len;
	char *text;		/* reply_json_text()'s */
	char key[];		/* view_key() of the requests it was made for */
};

static void view_body_release(void *cls)
{
	struct view_body *b = cls;

	if (--b->refs)
		return;
	free(b->text);
	free(b);
}

/* What shapes a status body besides its view (whose kind, name and asked
 * owner are its read's): who asks (the owner ids shown), the owner given
 * and whether an index was given and the view differs from it. Whatever
 * else of rq status_json or semaphore_json come to read goes here too, or
 * one asker's body reaches another. */
#define VIEW_KEY_MAX (8 + AUTH_NAME_MAX + OWNER_MAX_LEN)
static void view_key(const struct request *rq, char key[VIEW_KEY_MAX])
{
	const struct params *p = &rq->lock.params;
	bool owner = p->given & P_OWNER;

	snprintf(key, VIEW_KEY_MAX, "%d%d%d%d%s\n%s", rq->admin, owner, !!(p->given & P_INDEX),
		 rq->lock.watch.changed, rq->principal, owner ? p->owner : "");
}

/* 200 with the status body of v: the one kept with v if it was made for
 * requests like rq, else a new one, kept in its place. */
static enum MHD_Result reply_view(struct request *rq, struct lock_view *v)
{
	char key[VIEW_KEY_MAX];
	struct view_body *b = v->memo;

	view_key(rq, key);
	if (!b || strcmp(b->key, key)) {
		size_t len, klen = strlen(key) + 1;
		char *text = reply_json_text(v->semaphore ? semaphore_json(rq, v)
							  : status_json(rq, v), &len);

		if (!text)
			return MHD_NO;
		b = xmalloc(sizeof(*b) + klen);
		b->refs = 1;
		b->len = len;
		b->text = text;
		memcpy(b->key, key, klen);
		if (v->memo)
			v->memo_free(v->memo);
		v->memo = b;
		v->memo_free = view_body_release;
	}
	b->refs++;
	return reply_shared(rq, 200, "application/json", b->text, b->len, view_body_release, b);
}

static enum MHD_Result session_record(struct request *rq);

/* Resumed by machine_done: answer the outcome. */
static enum MHD_Result status_answer(struct request *rq)
{
	const struct watch *w = &rq->lock.watch;

	switch (w->outcome) {
	case WATCH_READ:
		return reply_view(rq, w->view);
	case WATCH_FAILED:
		return reply_failure(rq, w->result, &w->state);
	case WATCH_GONE:
		return MHD_NO;
	case WATCH_SHUTDOWN:
		return reply_shutting_down(rq);
	case WATCH_NO_OUTCOME:
		break;
	}
	return reply_error(rq, ERR_INTERNAL, NULL, "status of '%s' resumed without an outcome",
			   rq->name);
}

static enum MHD_Result get_lock(struct request *rq)
{
	const struct params *p = &rq->lock.params;

	if (params_or_reply(rq, (is_rw(rq) ? 0 : P_OWNER) | P_WAIT | P_INDEX) < 0)
		return MHD_YES;
	if (p->wait_ms > 0 && !(p->given & P_INDEX))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "wait_ms needs index: the index of the state you last saw "
				   "(a status answer's index; 0 for free)");
	rq->lock.machine = LOCK_MACHINE_WATCH;
	rq->lock.watch = (struct watch){
		.b = rq->backend,
		.kind = rq->route.kind,
		.name = rq->name,
		.owner = rq->route.kind == LOCK_KIND_SEMAPHORE && (p->given & P_OWNER) ? p->owner
										: NULL,
		.index = (p->given & P_INDEX) ? p->index : -1,
		.wait_ms = p->wait_ms,
		.fd = server_client_fd(rq),
		.done = machine_done,
		.done_ctx = rq,
	};
	watch_start(&rq->lock.watch);
	return server_suspend(rq, status_answer);
}

/* ----- Listing ----- */

#define LIST_DEFAULT_LIMIT 100

/* A page as JSON: {locks: [{name, kind, ttl_ms, holders, mode?}], cursor?}.
 * Owner ids only for whoever may see every lock's (auth off, or an admin
 * token); a client token sees the hold counts. */
static json_t *page_json(const struct request *rq, const struct lock_page *page)
{
	static const char *const modes[] = { "none", "read", "write" };
	json_t *locks = json_array(), *body;

	for (size_t i = 0; i < page->n; i++) {
		const struct lock_entry *e = &page->locks[i];
		json_t *holders = json_array(), *lock;

		for (size_t j = 0; j < e->nholders; j++) {
			const struct lock_holder *h = &e->holders[j];
			json_t *o = json_object();

			if (rq->admin)
				json_object_set_new(o, "owner", json_string(h->owner));
			if (rq->admin && h->value)
				json_object_set_new(o, "value", json_string(h->value));
			json_object_set_new(o, "holds", json_integer(h->holds));
			if (e->rw)
				json_object_set_new(o, "mode", json_string(modes[h->side]));
			json_array_append_new(holders, o);
		}
		lock = json_pack("{s:s, s:s}", "name", e->name, "kind",
				 e->semaphore ? "semaphore" : e->rw ? "rwlock" : "lock");
		if (e->semaphore)
			json_object_set_new(lock, "limit", json_integer(e->limit));
		if (e->rw)
			json_object_set_new(lock, "mode", json_string(modes[e->mode]));
		json_object_set_new(lock, "ttl_ms", json_integer(e->ttl_ms));
		json_object_set_new(lock, "holders", holders);
		json_array_append_new(locks, lock);
	}
	body = json_pack("{s:o}", "locks", locks);
	if (page->cursor)
		json_object_set_new(body, "cursor", json_string(page->cursor));
	return body;
}

/* The listing's outcome: build the page now (it lives only during this
 * call), answer it when MHD calls listed_answer. */
static void listed(void *ctx, enum lock_result r, const struct lock_state *st,
		   const struct lock_page *page)
{
	struct request *rq = ctx;

	rq->lock.result = r;
	rq->lock.state = *st;
	if (page)
		rq->answer = page_json(rq, page);
	server_resume(rq);
}

static enum MHD_Result listed_answer(struct request *rq)
{
	const struct lock_state *st = &rq->lock.state;
	json_t *body = rq->answer;

	rq->answer = NULL;
	switch (rq->lock.result) {
	case LOCK_OK:
		return body ? reply_json(rq, 200, body) : MHD_NO;
	case LOCK_BACKEND_DOWN:
		return reply_unavailable(rq, st->fault);
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "listing the locks: %s",
				   st->fault ? st->fault : "redis failed");
	}
}

static enum MHD_Result get_locks(struct request *rq)
{
	const struct params *p = &rq->lock.params;
	int64_t limit = (p->given & P_LIMIT) ? p->limit : LIST_DEFAULT_LIMIT;

	if (locks_list(rq->backend, params_prefix(p), (unsigned)limit,
		       (p->given & P_CURSOR) ? p->cursor : NULL, listed, rq) < 0)
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "cursor '%.64s' is not one a page of the listing gave", p->cursor);
	return server_suspend(rq, listed_answer);
}

/* ----- A semaphore's limit ----- */

static enum MHD_Result limit_set(struct request *rq)
{
	const struct lock_state *st = &rq->lock.state;

	if (rq->lock.result != LOCK_OK)
		return reply_failure(rq, rq->lock.result, st);
	return reply_json(rq, 200, json_pack("{s:s, s:I, s:I, s:I}", "name", rq->name,
					     "limit", (json_int_t)rq->lock.params.limit,
					     "available", (json_int_t)st->holds,
					     "previous_limit", (json_int_t)st->others));
}

/* PUT /semaphores/{name}/limit?limit=N: an admin's (anyone's with auth
 * off), the one way to change a limit in force. */
static enum MHD_Result put_limit(struct request *rq)
{
	if (params_or_reply(rq, P_LIMIT) < 0)
		return MHD_YES;
	if (!(rq->lock.params.given & P_LIMIT))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "limit is required: the new number of permits (1..%d)",
				   LOCKS_SEMAPHORE_LIMIT_MAX);
	if (!rq->admin)
		return reply_error(rq, ERR_FORBIDDEN, NULL,
				   "only an admin token may change a semaphore's limit");
	locks_set_limit(rq->backend, rq->name, rq->lock.params.limit, lock_done, rq);
	return server_suspend(rq, limit_set);
}

enum MHD_Result handle_lock(struct request *rq)
{
	switch (rq->route.op) {
	case OP_ACQUIRE: return put_lock(rq);
	case OP_RELEASE: return delete_lock(rq);
	case OP_HEARTBEAT: return post_heartbeat(rq);
	case OP_STATUS: return get_lock(rq);
	case OP_LIST: return get_locks(rq);
	case OP_SET_LIMIT: return put_limit(rq);
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "no lock handler for this route");
	}
}
