/* multilock.c -- all-or-nothing acquire of a set of locks for a session
 * (multilock.h says what it holds to). The phases:
 *
 *   READ     --session read: gone or full --(take back)----> DONE session
 *            --read: try entry 0 -------------------------> TRYING
 *   TRYING   --granted (or held by the session already):
 *              next entry, or all held --------------------> NOTING
 *            --held by another: take back what this call
 *              took; deadline ahead ----------------------> UNDOING -> WAITING
 *                         deadline past -------------------> UNDOING -> DONE refused
 *            --anything else: take back (with a grant too few
 *              replicas confirmed, when it may stand) ---------> UNDOING -> DONE refused
 *   WAITING  --the acquire machine: granted (the entry is
 *              this call's now) ---------------------------> READ (a new pass)
 *            --refused: take back (as above) --------------> UNDOING -> DONE refused
 *            --gone / shutdown ----------------------------> DONE
 *   NOTING   --every entry noted --------------------------> DONE granted
 *            --the session ended or is full: take back ----> UNDOING -> DONE session
 *   UNDOING  --a release Redis could not be told of: again
 *              after a pause, for up to MULTILOCK_UNDO_MS
 *            --some still stand then ------------------------> DONE standing
 *
 * done runs exactly once, from a callback, never inside multilock_start(). */
#include "service/lock/multilock.h"

#include "service/lock/backend.h"
#include "service/lock/waiters.h"
#include "service/base/log.h"
#include "service/base/util.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* How far a grant's lease may be off the session's before it is set to
 * it (the time between the two reads). */
#define ML_SLACK_MS 50

enum ml_phase { ML_IDLE, ML_READ, ML_TRYING, ML_UNDOING, ML_WAITING, ML_NOTING, ML_DONE };

static void try_next(struct multilock *m);

static void finish_multi(struct multilock *m, enum multilock_outcome o)
{
	m->phase = ML_DONE;
	m->outcome = o;
	m->done(m->done_ctx);
}

/* ----- Taking back what this call took -----
 *
 * A 503 says nothing of the call stands, so every holding this call added
 * is released before the answer. A release Redis could not be told of
 * (unreachable, refused as late, no reply) is sent again after a pause,
 * for up to MULTILOCK_UNDO_MS; the session forgets a holding only once
 * its release is answered, so one that may stand stays recorded and the
 * session's end frees it. What still stands then is answered as such
 * (MULTI_STANDING), never as a 503 that changed nothing. */

#define UNDO_PAUSE_MIN_MS 100
#define UNDO_PAUSE_MAX_MS 1000

static void wait_blocker(struct multilock *m);
static void undo_step(struct multilock *m);

static struct session_holding holding_of(const struct multilock *m,
					 const struct multilock_entry *e)
{
	return (struct session_holding){ .kind = e->kind, .name = e->name, .owner = m->session,
					 .token = e->token };
}

/* The record's removal is in: one Redis could not be told of (refused as
 * late, no reply) is sent again with the releases, for as long (found
 * by a probe: a 409 whose session went on listing a lock another owner
 * held, until its next heartbeat). */
static void forgotten(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct multilock_entry *e = ctx;

	(void)s;
	e->undo = r == LOCK_BACKEND_DOWN ? MULTI_UNDO_FORGET : MULTI_UNDO_NONE;
	undo_step(e->m);
}

/* Drop e's holding from the session's record; the answer waits for it,
 * so that the session lists nothing the answer says is not held. */
static void forget(struct multilock_entry *e)
{
	const struct session_holding h = holding_of(e->m, e);

	e->m->pending++;
	sessions_forget(e->m->b, e->m->session, &h, forgotten, e);
}

static void undone(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct multilock_entry *e = ctx;
	struct multilock *m = e->m;

	switch (r) {
	case LOCK_BACKEND_DOWN:	/* nothing changed, or no reply: try again */
		m->undo_fault = st->fault;
		break;
	case LOCK_SCRIPT_ERROR:	/* trying again will not help */
		m->undo_fault = st->fault;
		e->undo = MULTI_UNDO_STUCK;
		break;
	case LOCK_OK:
		e->undo = MULTI_UNDO_NONE;
		if (e->change && !st->undone)
			break;	/* a later call of the session changed it: its own now */
		forget(e);
		break;
	default:		/* not held, or no longer the session's holding */
		e->undo = MULTI_UNDO_NONE;
		forget(e);
		break;
	}
	undo_step(m);
}

/* A repeat of a holding the session had is put back: its lease, and the
 * number of its change, so that the grant it repeated can still be taken
 * back by the call that made it, if that call is not answered 200 either.
 * Gone after it (that call had been refused meanwhile: lua/lock_undo.lua),
 * the holding is forgotten by the session too. Once, whatever it hears: a
 * repeat made no holding, and none stands because of it. */
static void repeat_undone(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct multilock_entry *e = ctx;
	struct multilock *m = e->m;

	e->undo = MULTI_UNDO_NONE;
	if (r == LOCK_OK && st->undone && st->gone)
		forget(e);
	undo_step(m);
}

/* Release every entry still to be taken back. */
static void send_undos(struct multilock *m)
{
	m->pending = 1;		/* held until every release is sent */
	for (unsigned k = 0; k < m->n; k++) {
		struct multilock_entry *e = &m->e[k];

		if (e->undo == MULTI_UNDO_FORGET) {
			forget(e);
			continue;
		}
		if (e->undo == MULTI_UNDO_REPEAT) {
			m->pending++;
			locks_undo(m->b, e->kind, e->name, m->session, e->repeat, repeat_undone, e);
			e->repeat = 0;
			continue;
		}
		if (e->undo != MULTI_UNDO_RETRY)
			continue;
		m->pending++;
		if (e->change)	/* only while the grant is the holding's last change */
			locks_undo(m->b, e->kind, e->name, m->session, e->change, undone, e);
		else
			locks_release(m->b, e->kind, e->name, m->session, m->principal, undone, e);
	}
	/* the first release's callback comes later, never inside locks_release */
	undo_step(m);
}

static void undo_again(struct loop *l, struct loop_timer *t)
{
	(void)l;
	send_undos(container_of(t, struct multilock, undo_timer));
}

/* Entries whose take-back is in state undo. */
static unsigned undo_count(const struct multilock *m, unsigned undo)
{
	unsigned c = 0;

	for (unsigned k = 0; k < m->n; k++)
		c += m->e[k].undo == undo;
	return c;
}

/* One answer of a round of releases is in: once all are, try the ones
 * Redis could not be told of again, or go on. */
static void undo_step(struct multilock *m)
{
	int64_t now = now_ms();

	if (--m->pending)
		return;
	if (undo_count(m, MULTI_UNDO_RETRY) + undo_count(m, MULTI_UNDO_FORGET) &&
	    now + m->undo_pause_ms < m->undo_until_ms && !waiters_shutting_down()) {
		loop_timer_set(m->b->loop, &m->undo_timer, now + m->undo_pause_ms);
		m->undo_pause_ms = m->undo_pause_ms * 2 < UNDO_PAUSE_MAX_MS ? m->undo_pause_ms * 2
									  : UNDO_PAUSE_MAX_MS;
		return;
	}
	for (unsigned k = 0; k < m->n; k++)
		if (m->e[k].undo == MULTI_UNDO_FORGET) {	/* released: not standing */
			m->e[k].undo = MULTI_UNDO_NONE;
			log_warn("multi-lock of session %s: %s '%s' was released, but redis could "
				 "not be told to take it out of the session's record: the session "
				 "may list it until its next heartbeat", m->session,
				 sessions_kind_label(m->e[k].kind), m->e[k].name);
		}
	m->standing = m->n - undo_count(m, MULTI_UNDO_NONE);
	if (m->standing) {
		for (unsigned k = 0; k < m->n; k++) {
			const struct session_holding h = holding_of(m, &m->e[k]);

			if (m->e[k].undo == MULTI_UNDO_NONE)
				continue;
			/* recorded, if it was not: the session's end frees it */
			sessions_record(m->b, m->session, &h, m->holdings_cap, NULL, NULL);
			log_warn("multi-lock of session %s: %s '%s' could not be taken back (%s); "
				 "it stands to its lease end at most, or the session's end",
				 m->session, sessions_kind_label(m->e[k].kind), m->e[k].name,
				 m->undo_fault ? m->undo_fault : "redis did not answer");
		}
		finish_multi(m, MULTI_STANDING);
	} else if (m->after == MULTI_NO_OUTCOME) {
		wait_blocker(m);
	} else {
		finish_multi(m, m->after);
	}
}

/* Take back every holding this call added -- the grant's own change
 * (locks_undo), so that a later call of the session (a retry, a single
 * acquire with session=) keeps what it was answered; a release when that
 * number is unknown (no answer) or stale (the blocker's lease was cut) --
 * then wait for the blocker (after MULTI_NO_OUTCOME) or end with after. */
static void take_back(struct multilock *m, enum multilock_outcome after)
{
	m->phase = ML_UNDOING;
	m->after = after;
	m->undo_until_ms = now_ms() + MULTILOCK_UNDO_MS;
	m->undo_pause_ms = UNDO_PAUSE_MIN_MS;
	for (unsigned k = 0; k < m->n; k++) {
		struct multilock_entry *e = &m->e[k];

		e->m = m;
		if (!e->taken) {
			if (e->repeat)
				e->undo = MULTI_UNDO_REPEAT;
			continue;
		}
		e->taken = false;
		e->undo = MULTI_UNDO_RETRY;
	}
	send_undos(m);
}

/* ----- Passes ----- */

static void multi_session_read(void *ctx, enum lock_result r, const struct session_info *s);

static void multi_read_session(struct multilock *m)
{
	m->phase = ML_READ;
	sessions_read(m->b, m->session, m->principal, multi_session_read, m);
}

/* Does the session record entry e already? */
static bool multi_listed(const struct session_info *s, const struct multilock *m,
			 const struct multilock_entry *e)
{
	for (size_t k = 0; k < s->n; k++)
		if (s->holdings[k].kind == e->kind && !strcmp(s->holdings[k].name, e->name) &&
		    !strcmp(s->holdings[k].owner, m->session))
			return true;
	return false;
}

/* The blocker's lease is cut to the session's: go on (lost meanwhile:
 * tried again with the others). */
static void cut(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct multilock *m = ctx;

	(void)st;
	if (r == LOCK_OK) {
		m->e[m->i].ttl_ms = m->left_ms;
		m->e[m->i].change = 0;	/* the renewal is a change of its own */
	} else {
		m->e[m->i].taken = false;
	}
	m->i = 0;
	try_next(m);
}

/* Record e (fencing token token) in the session; done hears, with e as
 * its context (NULL: nobody). A repeat must be listed already: a holding
 * of the session's id outside the session (taken without session=, with
 * its own lease, perhaps for another session) is not adopted. */
static void multi_note(struct multilock *m, struct multilock_entry *e, int64_t token,
		       session_fn done)
{
	const struct session_holding h = { .kind = e->kind, .name = e->name, .owner = m->session,
					   .token = token, .repeat = !e->taken };

	e->m = m;
	sessions_record(m->b, m->session, &h, m->holdings_cap, done, e);
}

static void multi_session_read(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct multilock *m = ctx;
	int64_t count;

	m->session_result = r;
	if (r == LOCK_OK && s->lease_ms < 1)
		m->session_result = LOCK_NOT_HELD;
	if (m->session_result != LOCK_OK) {
		take_back(m, MULTI_SESSION);
		return;
	}
	count = (int64_t)s->n;
	for (unsigned k = 0; k < m->n; k++) {
		m->e[k].had = multi_listed(s, m, &m->e[k]);
		if (!m->e[k].had)
			count++;
	}
	if (count > m->holdings_cap) {
		m->session_result = LOCK_TOO_MANY_HOLDS;
		m->session_count = count;
		take_back(m, MULTI_SESSION);
		return;
	}
	m->left_ms = s->lease_ms;
	m->ends_ms = s->ends_ms;
	m->i = 0;
	m->phase = ML_TRYING;
	for (unsigned k = 0; k < m->n; k++)
		if (m->e[k].taken && (m->e[k].ttl_ms > m->left_ms + ML_SLACK_MS ||
				      m->e[k].ttl_ms + ML_SLACK_MS < m->left_ms)) {
			/* the blocker, granted with the lease left when its wait
			 * began (or when the session was last read): it must
			 * not outlive the session, nor end before it where a
			 * heartbeat renewed the session meanwhile */
			m->i = k;
			locks_renew(m->b, m->e[k].kind, m->e[k].name, m->session, m->principal,
				    m->left_ms, m->ends_ms, cut, m);
			return;
		}
	try_next(m);
}

static void multi_tried(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct multilock *m = ctx;
	struct multilock_entry *e = &m->e[m->i];

	m->result = r;
	m->state = *st;
	if (r == LOCK_OK) {
		if (st->added) {
			e->taken = true;
			e->change = st->change;
			/* recorded at once, so that the session's end frees it
			 * even when Redis stops before the set is whole (a 503
			 * whose take-back cannot reach Redis either) */
			multi_note(m, e, st->token, NULL);
		} else {
			e->repeat = st->change;
		}
		e->token = st->token;
		e->ttl_ms = st->ttl_ms;
		m->i++;
		try_next(m);
		return;
	}
	m->blocker = m->i;
	m->holder_ttl_ms = st->ttl_ms;
	if (r == LOCK_UNCONFIRMED && !st->undone) {
		e->taken = true;	/* a grant too few replicas had may stand */
		e->change = 0;
	}
	if (r == LOCK_BACKEND_DOWN && !e->had) {
		e->taken = true;	/* no answer: it may have run */
		e->change = 0;
	}
	if (r == LOCK_HELD && now_ms() < m->deadline_ms)
		take_back(m, MULTI_NO_OUTCOME);
	else
		take_back(m, MULTI_REFUSED);
}

static void noted(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct multilock_entry *e = ctx;
	struct multilock *m = e->m;

	if (r != LOCK_OK && m->session_result == LOCK_OK) {
		m->session_result = r;
		if (r == LOCK_TOO_MANY_HOLDS)
			m->session_count = s->cap_n;
		if (r == LOCK_NOT_OWNER)	/* held by the session's id outside it */
			m->blocker = (unsigned)(e - m->e);
	}
	if (--m->pending)
		return;
	if (m->session_result != LOCK_OK)
		take_back(m, MULTI_SESSION);
	else
		finish_multi(m, MULTI_GRANTED);
}

/* Every entry is held: record each in the session (all at once; those
 * recorded as they were taken are there already). */
static void note_all(struct multilock *m)
{
	m->phase = ML_NOTING;
	m->session_result = LOCK_OK;
	m->pending = m->n;
	for (unsigned k = 0; k < m->n; k++)
		multi_note(m, &m->e[k], m->e[k].token, noted);
}

static void try_next(struct multilock *m)
{
	struct multilock_entry *e;

	while (m->i < m->n && m->e[m->i].taken)
		m->i++;		/* the one the acquire machine waited for */
	if (m->i == m->n) {
		note_all(m);
		return;
	}
	e = &m->e[m->i];
	locks_acquire(m->b, e->kind, e->name, m->session, m->principal, m->left_ms, 0,
		      &(struct lock_extras){ .limit = e->limit, .ends_ms = m->ends_ms }, multi_tried,
		      m);
}

/* ----- Waiting for the lock in the way ----- */

static void acquire_over(void *ctx)
{
	struct multilock *m = ctx;

	/* the machine must be out of its own callback before it is ended */
	loop_defer(m->b->loop, &m->task);
}

static void after_wait(struct loop *l, void *data)
{
	struct multilock *m = data;
	struct acquire *a = &m->acq;
	struct multilock_entry *e = &m->e[m->blocker];

	(void)l;
	acquire_end(a, true);
	switch (a->outcome) {
	case ACQUIRE_GRANTED:
		if (a->state.added) {
			e->taken = true;
			e->change = a->state.change;
		}
		e->token = a->state.token;
		e->ttl_ms = a->state.ttl_ms;
		multi_read_session(m);
		return;
	case ACQUIRE_REFUSED:
		if (m->session_ended) {	/* multilock_session_ended stopped the wait */
			m->session_result = LOCK_NOT_HELD;
			take_back(m, MULTI_SESSION);
			return;
		}
		m->result = a->result;
		m->state = a->state;
		m->holder_ttl_ms = a->holder_ttl_ms;
		if (a->result == LOCK_UNCONFIRMED && !a->state.undone) {
			e->taken = true;	/* it may stand: released with the rest */
			e->change = 0;
		}
		take_back(m, MULTI_REFUSED);
		return;
	case ACQUIRE_GONE:
		finish_multi(m, MULTI_GONE);
		return;
	default:
		finish_multi(m, MULTI_SHUTDOWN);
		return;
	}
}

static void wait_blocker(struct multilock *m)
{
	struct multilock_entry *e = &m->e[m->blocker];
	int64_t left = m->deadline_ms - now_ms();

	if (m->session_ended) {	/* heard during the pass or its take-back */
		m->session_result = LOCK_NOT_HELD;
		finish_multi(m, MULTI_SESSION);
		return;
	}
	if (left <= 0) {
		finish_multi(m, MULTI_REFUSED);
		return;
	}
	m->phase = ML_WAITING;
	m->acq_used = true;
	m->acq = (struct acquire){
		.ops = &acquire_ops_real,
		.b = m->b,
		.kind = e->kind,
		.name = e->name,
		.owner = m->session,
		.principal = m->principal,
		.ttl_ms = m->left_ms,
		.extras = { .limit = e->limit, .ends_ms = m->ends_ms },
		.wait_ms = left,
		.fd = m->fd,
		.done = acquire_over,
		.done_ctx = m,
	};
	acquire_start(&m->acq);
}

void multilock_start(struct multilock *m)
{
	loop_task_init(&m->task, after_wait, m);
	loop_timer_init(&m->undo_timer, undo_again);
	m->deadline_ms = now_ms() + m->wait_ms;
	multi_read_session(m);
}

void multilock_session_ended(struct multilock *m)
{
	m->session_ended = true;
	if (m->phase == ML_WAITING)
		acquire_cancel(&m->acq, LOCK_NOT_HELD);
}

void multilock_session_renewed(struct multilock *m, int64_t lease_ms, int64_t ends_ms)
{
	if (lease_ms < 1)
		return;
	m->left_ms = lease_ms;
	if (ends_ms)
		m->ends_ms = ends_ms;
	if (m->phase == ML_WAITING)
		acquire_set_lease(&m->acq, m->left_ms, m->ends_ms);
}

/* A holding of an undelivered grant, taken back after its request (and
 * m) is gone: what the release's answer needs. */
struct undelivered {
	const struct backend *b;
	struct session_holding h;
	int64_t change;			/* undone, or 0: released */
	char *session;
	char name[];
};

static void undelivered_released(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct undelivered *u = ctx;

	if (r == LOCK_BACKEND_DOWN || r == LOCK_SCRIPT_ERROR)
		log_warn("multi-lock of session %s: %s '%s' of a grant not delivered could not be "
			 "taken back (%s); it stands to its lease end at most, or the session's "
			 "end", u->session, sessions_kind_label(u->h.kind), u->name,
			 st->fault ? st->fault : "redis did not answer");
	else if (!(r == LOCK_OK && u->change && !st->undone))	/* no longer the session's */
		sessions_forget(u->b, u->session, &u->h, NULL, NULL);
	free(u->session);
	free(u);
}

/* Take e back (as take_back does), and once that is answered drop it from
 * the session's record (if it fails it stays recorded: the session's end
 * frees it). */
static void release_undelivered(const struct multilock *m, struct multilock_entry *e)
{
	size_t len = strlen(e->name) + 1;
	struct undelivered *u = xcalloc(1, sizeof(*u) + len);

	memcpy(u->name, e->name, len);
	u->b = m->b;
	u->session = xstrdup(m->session);
	u->h = (struct session_holding){ .kind = e->kind, .name = u->name, .owner = u->session,
					 .token = e->token };
	u->change = e->change;
	e->taken = false;
	if (u->change)	/* only while the grant is the holding's last change */
		locks_undo(m->b, e->kind, e->name, m->session, u->change, undelivered_released, u);
	else
		locks_release(m->b, e->kind, e->name, m->session, m->principal,
			      undelivered_released, u);
}

void multilock_end(struct multilock *m, bool delivered)
{
	if (m->phase == ML_IDLE)
		return;
	loop_timer_stop(m->b->loop, &m->undo_timer);
	if (m->phase == ML_WAITING) {	/* a closed connection under a waiting call */
		loop_cancel(m->b->loop, &m->task);
		acquire_end(&m->acq, false);
	}
	if (m->phase == ML_DONE && m->outcome == MULTI_GRANTED && !delivered) {
		for (unsigned k = 0; k < m->n; k++)
			if (m->e[k].taken)
				release_undelivered(m, &m->e[k]);
		log_info("answer to the multi-lock of session %s was not delivered; taking it "
			 "back", m->session);
	}
	m->phase = ML_IDLE;
}
