/* handle_locks.c -- every lock resource: /locks/{name}, /fairlocks/{name}
 * and /rwlocks/{name}/read|write: acquire (PUT, waiting if asked), release
 * (DELETE), status (GET) and heartbeat (POST .../heartbeat). The kind comes
 * from the route; what differs between kinds is the service's business.
 *
 * Every Redis call is sent without waiting: the handler suspends the
 * connection (server_await) and names the function that goes on once the
 * outcome is in (rq->next); lock_done stores it and resumes.
 *
 * A waiting acquire (docs/ARCHITECTURE.md) goes: try; on "held", join the
 * lock's channel, and if the subscription is already live try once more (a release
 * in between would otherwise be missed), else sleep until it is confirmed;
 * then suspend the connection and sleep until a wake (release message,
 * lease end, deadline, hang-up, shutdown), try again, and so on. */
#include "handlers.h"

#include "reply.h"
#include "server.h"
#include "../service/log.h"
#include "../service/metrics.h"
#include "../service/util.h"
#include "../service/waiters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((unsigned)LOCK_WAIT_WRITER == (unsigned)WAITER_WRITER &&
	       (unsigned)LOCK_WAIT_TIMER_ALL == (unsigned)WAITER_TIMER_ALL,
	       "lock wait flags are waiter flags");

/* While Redis is unreachable a waiter retries this often (it is also woken
 * when the subscriber reconnects). */
#define BACKEND_RETRY_MS 250

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
	json_t *extra = json_pack("{s:I}", "ttl_ms", (json_int_t)rq->holder_ttl_ms);
	long long n = (long long)st->others;

	rq->retry_after_s = retry_after_s(rq->holder_ttl_ms);
	switch (st->why) {
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
				   plural(n), rq->params.owner, rq->params.owner);
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
				   rq->name, rq->params.owner, n, plural(n));
	case LOCK_WHY_OTHER_READERS:
		return reply_error(rq, ERR_NOT_OWNER, NULL,
				   "write lock '%s' is not held by '%s', which reads it (with %lld "
				   "other owner%s)", rq->name, rq->params.owner, n, plural(n));
	case LOCK_WHY_WRITER:
		return reply_error(rq, ERR_NOT_OWNER, NULL,
				   "read-write lock '%s' is written by another owner", rq->name);
	default:
		return reply_error(rq, ERR_NOT_OWNER, NULL, "%s '%s' is held by another owner",
				   locks_kind_label(rq->route.kind), rq->name);
	}
}

static enum MHD_Result reply_failure(struct request *rq, enum lock_result r,
				     const struct lock_state *st)
{
	const char *label = locks_kind_label(rq->route.kind);

	switch (r) {
	case LOCK_HELD:
		return reply_locked(rq, st);
	case LOCK_NOT_HELD:
		if (rq->route.kind == LOCK_KIND_READ)	/* read holds are each owner's own */
			return reply_error(rq, ERR_NOT_HELD, NULL,
					   "read lock '%s' is not held by '%s': its lease ran out or "
					   "it was released", rq->name, rq->params.owner);
		return reply_error(rq, ERR_NOT_HELD, NULL,
				   "%s '%s' is not held: its lease ran out or it was released",
				   label, rq->name);
	case LOCK_NOT_OWNER:
		return reply_not_owner(rq, st);
	case LOCK_WRONG_KIND:
		if (st->why == LOCK_WHY_NOT_A_LOCK)
			return reply_error(rq, ERR_WRONG_KIND, NULL,
					   "name '%s' is in use by something that is not a lock (data "
					   "without a lease, or of another type, under the name or one of "
					   "its lock's keys); it is left alone",
					   rq->name);
		return reply_error(rq, ERR_WRONG_KIND, NULL,
				   "name '%s' is in use as another kind of lock", rq->name);
	case LOCK_BACKEND_DOWN:
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL, "%s",
				   st->fault ? st->fault : "redis cannot be reached; retry shortly");
	case LOCK_SCRIPT_ERROR:
		metrics_inc(METRIC_REDIS_ERRORS);	/* as the 503s count themselves */
		return reply_error(rq, ERR_INTERNAL, NULL, "%s '%s': %s", label, rq->name,
				   st->fault ? st->fault : "the lock script failed in redis");
	case LOCK_OK:
	case LOCK_RESULT_COUNT:
		break;
	}
	return reply_error(rq, ERR_INTERNAL, NULL, "unexpected lock result %d", (int)r);
}

/* Stop waiting. lease_end_ms (monotonic, 0 = unknown): when the lease of
 * the lock's holder ends as rq last saw it (its own, once granted), for
 * the other waiters, who may then have nobody else to tell them. */
static void leave_waiter(struct request *rq, int64_t lease_end_ms)
{
	if (rq->waiter) {
		waiters_leave(rq->waiter, lease_end_ms);
		rq->waiter = NULL;
	}
}

/* The request stops waiting without the lock: leave, and give back its
 * queue place so nobody waits behind it. Returns true when a place was
 * given back; done (may be NULL) then hears when Redis has it. */
static bool give_up(struct request *rq, lock_done_fn done, int64_t lease_end_ms)
{
	leave_waiter(rq, lease_end_ms);
	if (!rq->queued)
		return false;
	rq->queued = false;
	locks_dequeue(rq->route.kind, rq->name, rq->params.owner, done, done ? rq : NULL);
	return true;
}

static enum MHD_Result reply_granted(struct request *rq, const struct lock_state *st)
{
	leave_waiter(rq, st->ttl_ms > 0 ? now_ms() + st->ttl_ms : 0);
	if (rq->params.wait_ms > 0)
		metrics_wait(rq->route.kind, true, now_us() - rq->started_us);
	if (request_client_gone(rq))
		return MHD_NO;	/* nobody will learn of it: released on completion */
	metrics_lock(rq->route.kind, MOP_ACQUIRE, LOCK_OK);
	return reply_json(rq, 200, json_pack("{s:s, s:s, s:I, s:I, s:I}",
					     "name", rq->name, "owner", rq->params.owner,
					     "fencing_token", (json_int_t)st->token,
					     "ttl_ms", (json_int_t)st->ttl_ms,
					     "holds", (json_int_t)st->holds));
}

/* ----- Waiting for Redis ----- */

/* The operation rq sent has its outcome: keep it, and let MHD call the
 * handler again (server.c runs rq->next). */
static void lock_done(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct request *rq = ctx;

	rq->result = r;
	rq->state = *st;
	server_resume(rq);
}

/* An acquire's outcome. What it means for cleaning up is noted at once:
 * MHD may close a connection whose client left without calling the
 * handler again, and then handle_lock_completed() must still give back
 * the grant or the queue place. */
static void acquired(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct request *rq = ctx;

	rq->queued |= st->queued;
	if (r == LOCK_OK) {
		rq->queued = false;	/* the grant took it out of any queue */
		rq->grant_pending = true;
	}
	lock_done(ctx, r, st);
}

/* A failed acquire's queue place is given back: answer the failure, which
 * rq->failure and rq->state still hold. */
static void dequeued(void *ctx, enum lock_result r, const struct lock_state *st)
{
	(void)r;
	(void)st;
	server_resume(ctx);
}

/* ----- Acquire and wait ----- */

static void resume_request(void *ctx)
{
	struct request *rq = ctx;

	server_resume(rq);
}

static int client_fd(struct request *rq)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

static enum MHD_Result acquire_tried(struct request *rq);

static enum MHD_Result acquire_failed(struct request *rq)
{
	metrics_lock(rq->route.kind, MOP_ACQUIRE, rq->failure);
	if (rq->params.wait_ms > 0)
		metrics_wait(rq->route.kind, false, now_us() - rq->started_us);
	return reply_failure(rq, rq->failure, &rq->state);
}

static enum MHD_Result acquire_try(struct request *rq)
{
	locks_acquire(rq->route.kind, rq->name, rq->params.owner, rq->params.ttl_ms,
		      rq->params.wait_ms > 0, acquired, rq);
	return server_await(rq, acquire_tried);
}

static enum MHD_Result acquire_tried(struct request *rq)
{
	const struct lock_state *st = &rq->state;
	enum lock_result r = rq->result;
	int64_t retry_at;
	bool confirmed;

	if (r == LOCK_OK)
		return reply_granted(rq, st);
	if (r == LOCK_HELD)
		rq->holder_ttl_ms = st->ttl_ms;
	/* A new request gets 503 at once when Redis is down; one that is
	 * already waiting keeps waiting for Redis until its deadline. */
	if ((r == LOCK_HELD || (r == LOCK_BACKEND_DOWN && rq->waiter)) &&
	    now_ms() < rq->deadline_ms) {
		if (!rq->waiter) {
			char *channel = locks_wait_channel(rq->route.kind, rq->name, rq->params.owner);

			rq->waiter = waiters_join(channel, client_fd(rq), resume_request, rq,
						  rq->deadline_ms, locks_wait_flags(rq->route.kind),
						  &confirmed);
			free(channel);
			if (confirmed)
				return acquire_try(rq);
		}
		retry_at = 0;
		if (r == LOCK_BACKEND_DOWN)
			retry_at = now_ms() + BACKEND_RETRY_MS;
		else if (st->retry_ms > 0)
			retry_at = now_ms() + st->retry_ms;
		MHD_suspend_connection(rq->conn);
		waiters_sleep(rq->waiter, retry_at);
		return MHD_YES;
	}
	/* out of the queue before the answer: whoever hears "locked" finds
	 * nobody waiting on its behalf */
	rq->failure = r;
	retry_at = r == LOCK_HELD && st->retry_ms > 0 ? now_ms() + st->retry_ms : 0;
	if (give_up(rq, dequeued, retry_at))
		return server_await(rq, acquire_failed);
	return acquire_failed(rq);
}

static enum MHD_Result acquire(struct request *rq)
{
	if (request_params_or_reply(rq, P_OWNER | P_TTL | P_WAIT) < 0)
		return MHD_YES;
	if (!(rq->params.given & P_OWNER))
		random_hex(rq->params.owner, 16);
	if (!(rq->params.given & P_TTL))
		rq->params.ttl_ms = rq->cfg->default_ttl_ms;
	rq->deadline_ms = now_ms() + rq->params.wait_ms;
	return acquire_try(rq);
}

enum MHD_Result handle_lock_resumed(struct request *rq)
{
	switch (waiters_wake_reason(rq->waiter)) {
	case WAKE_GONE:
		give_up(rq, NULL, 0);
		return MHD_NO;
	case WAKE_SHUTDOWN:
		give_up(rq, NULL, 0);
		return reply_error(rq, ERR_BACKEND_UNAVAILABLE, NULL,
				   "dlockd is shutting down; retry on another instance");
	default:
		return acquire_try(rq);
	}
}

void handle_lock_completed(struct request *rq, enum MHD_RequestTerminationCode toe)
{
	give_up(rq, NULL, 0);
	if (rq->grant_pending && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
		locks_release(rq->route.kind, rq->name, rq->params.owner, NULL, NULL);
		metrics_lock(rq->route.kind, MOP_ACQUIRE, METRIC_ABANDONED);
		log_info("answer to the grant of lock '%s' was not delivered; released it",
			 rq->name);
	}
	rq->grant_pending = false;
}

/* ----- Release, heartbeat, status ----- */

static enum MHD_Result force_released(struct request *rq)
{
	metrics_lock(rq->route.kind, MOP_FORCE_RELEASE, rq->result);
	if (rq->result != LOCK_OK)
		return reply_failure(rq, rq->result, &rq->state);
	return reply_json(rq, 200, json_pack("{s:b}", "released", rq->state.locked));
}

static enum MHD_Result released(struct request *rq)
{
	metrics_lock(rq->route.kind, MOP_RELEASE, rq->result);
	if (rq->result != LOCK_OK)
		return reply_failure(rq, rq->result, &rq->state);
	return reply_json(rq, 200, json_pack("{s:b, s:I}", "released", !rq->state.locked,
					     "holds", (json_int_t)rq->state.holds));
}

static enum MHD_Result release(struct request *rq)
{
	bool force;

	if (request_params_or_reply(rq, P_OWNER | P_FORCE) < 0)
		return MHD_YES;
	force = rq->params.force;
	if (force && (rq->params.given & P_OWNER))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "give either owner or force=true, not both");
	if (!force && !(rq->params.given & P_OWNER))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "owner is required to release a lock (or force=true)");
	if (force && !rq->admin)
		return reply_error(rq, ERR_FORBIDDEN, NULL,
				   "only an admin token may force a release");
	if (force) {
		locks_force_release(rq->route.kind, rq->name, lock_done, rq);
		return server_await(rq, force_released);
	}
	locks_release(rq->route.kind, rq->name, rq->params.owner, lock_done, rq);
	return server_await(rq, released);
}

static enum MHD_Result renewed(struct request *rq)
{
	metrics_lock(rq->route.kind, MOP_HEARTBEAT, rq->result);
	if (rq->result != LOCK_OK)
		return reply_failure(rq, rq->result, &rq->state);
	if (rq->state.ttl_ms > 0) {
		/* a shorter lease ends sooner than this lock's waiters here
		 * were told: expiry publishes nothing */
		char *channel = locks_wait_channel(rq->route.kind, rq->name, rq->params.owner);

		waiters_lease_ends(channel, now_ms() + rq->state.ttl_ms);
		free(channel);
	}
	return reply_json(rq, 200, json_pack("{s:I}", "ttl_ms", (json_int_t)rq->state.ttl_ms));
}

static enum MHD_Result heartbeat(struct request *rq)
{
	if (request_params_or_reply(rq, P_OWNER | P_TTL) < 0)
		return MHD_YES;
	if (!(rq->params.given & P_OWNER))
		return reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
				   "owner is required to renew a lease");
	if (!(rq->params.given & P_TTL))
		rq->params.ttl_ms = rq->cfg->default_ttl_ms;
	locks_renew(rq->route.kind, rq->name, rq->params.owner, rq->params.ttl_ms, lock_done, rq);
	return server_await(rq, renewed);
}

static bool is_rw(const struct request *rq)
{
	return rq->route.kind == LOCK_KIND_READ || rq->route.kind == LOCK_KIND_WRITE;
}

static enum MHD_Result status_read(struct request *rq)
{
	static const char *const modes[] = { "none", "read", "write" };
	const struct lock_state *st = &rq->state;
	json_t *body;

	if (rq->result != LOCK_OK)
		return reply_failure(rq, rq->result, &rq->state);
	body = json_pack("{s:s, s:b, s:I}", "name", rq->name, "locked", st->locked,
			 "ttl_ms", (json_int_t)st->ttl_ms);
	if (is_rw(rq)) {
		json_object_set_new(body, "mode", json_string(modes[st->mode]));
		json_object_set_new(body, "readers", json_integer(st->readers));
	} else if (rq->params.given & P_OWNER) {
		json_object_set_new(body, "holds", json_integer(st->holds));
		json_object_set_new(body, "held", json_boolean(st->holds > 0));
	}
	return reply_json(rq, 200, body);
}

static enum MHD_Result status(struct request *rq)
{
	if (request_params_or_reply(rq, is_rw(rq) ? 0 : P_OWNER) < 0)
		return MHD_YES;
	locks_status(rq->route.kind, rq->name,
		     (rq->params.given & P_OWNER) ? rq->params.owner : NULL, lock_done, rq);
	return server_await(rq, status_read);
}

enum MHD_Result handle_lock(struct request *rq)
{
	switch (rq->route.op) {
	case OP_ACQUIRE: return acquire(rq);
	case OP_RELEASE: return release(rq);
	case OP_HEARTBEAT: return heartbeat(rq);
	case OP_STATUS: return status(rq);
	default:
		return reply_error(rq, ERR_INTERNAL, NULL, "no lock handler for this route");
	}
}
