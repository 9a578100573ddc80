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
 *
 * done runs exactly once, from a callback, never inside multilock_start(). */
#include "service/lock/multilock.h"

#include "service/lock/backend.h"
#include "service/base/log.h"
#include "service/base/util.h"

#include <stddef.h>
#include <string.h>

/* How far a grant's lease may run past the session's before it is cut
 * to it (the time between the two reads). */
#define ML_SLACK_MS 50

enum ml_phase { ML_IDLE, ML_READ, ML_TRYING, ML_UNDOING, ML_WAITING, ML_NOTING, ML_DONE };

static void try_next(struct multilock *m);

static void finish_multi(struct multilock *m, enum multilock_outcome o)
{
	m->phase = ML_DONE;
	m->outcome = o;
	m->done(m->done_ctx);
}

/* ----- Taking back what this call took ----- */

static void wait_blocker(struct multilock *m);

static void undone(void *ctx, enum lock_result r, const struct lock_state *st)
{
	struct multilock *m = ctx;

	(void)st;
	if (r != LOCK_OK && r != LOCK_NOT_HELD)
		log_warn("multi-lock of session %s: a holding could not be taken back (result "
			 "%d); it ends with its lease", m->session, (int)r);
	if (--m->pending)
		return;
	if (m->after == MULTI_NO_OUTCOME)
		wait_blocker(m);
	else
		finish_multi(m, m->after);
}

/* Take back every holding this call added (a release: the session holds
 * each once, and a cut lease made the grant's own change number stale
 * for locks_undo), then wait for the blocker
 * (after MULTI_NO_OUTCOME) or end with after. */
static void take_back(struct multilock *m, enum multilock_outcome after)
{
	m->phase = ML_UNDOING;
	m->after = after;
	m->pending = 1;		/* held until every undo is sent */
	for (unsigned k = 0; k < m->n; k++) {
		struct multilock_entry *e = &m->e[k];

		const struct session_holding h = { .kind = e->kind, .name = e->name,
						   .owner = m->session, .token = e->token };

		if (!e->taken)
			continue;
		e->taken = false;
		m->pending++;
		locks_release(m->b, e->kind, e->name, m->session, m->principal, undone, m);
		/* recorded as it was taken: after the release (the same
		 * connection, in order), no longer the session's */
		sessions_forget(m->b, m->session, &h);
	}
	/* the first release's callback comes later, never inside locks_release */
	undone(m, LOCK_OK, NULL);
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
	if (r == LOCK_OK)
		m->e[m->i].ttl_ms = m->left_ms;
	else
		m->e[m->i].taken = false;
	m->i = 0;
	try_next(m);
}

/* Record e (fencing token token) in the session; done hears (NULL: nobody). */
static void multi_note(struct multilock *m, const struct multilock_entry *e, int64_t token,
		       session_fn done)
{
	const struct session_holding h = { .kind = e->kind, .name = e->name, .owner = m->session,
					   .token = token, .repeat = !e->taken };

	sessions_record(m->b, m->session, &h, m->holdings_cap, done, m);
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
	for (unsigned k = 0; k < m->n; k++)
		if (!multi_listed(s, m, &m->e[k]))
			count++;
	if (count > m->holdings_cap) {
		m->session_result = LOCK_TOO_MANY_HOLDS;
		m->session_count = count;
		take_back(m, MULTI_SESSION);
		return;
	}
	m->left_ms = s->lease_ms;
	m->i = 0;
	m->phase = ML_TRYING;
	for (unsigned k = 0; k < m->n; k++)
		if (m->e[k].taken && m->e[k].ttl_ms > m->left_ms + ML_SLACK_MS) {
			/* the blocker, granted with the lease left when its wait
			 * began: it must not outlive the session */
			m->i = k;
			locks_renew(m->b, m->e[k].kind, m->e[k].name, m->session, m->principal,
				    m->left_ms, cut, m);
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
			/* recorded at once, so that the session's end frees it
			 * even when Redis stops before the set is whole (a 503
			 * whose take-back cannot reach Redis either) */
			multi_note(m, e, st->token, NULL);
		}
		e->token = st->token;
		e->ttl_ms = st->ttl_ms;
		m->i++;
		try_next(m);
		return;
	}
	m->blocker = m->i;
	m->holder_ttl_ms = st->ttl_ms;
	if (r == LOCK_UNCONFIRMED && !st->undone)
		e->taken = true;	/* a grant too few replicas had may stand */
	if (r == LOCK_HELD && now_ms() < m->deadline_ms)
		take_back(m, MULTI_NO_OUTCOME);
	else
		take_back(m, MULTI_REFUSED);
}

static void noted(void *ctx, enum lock_result r, const struct session_info *s)
{
	struct multilock *m = ctx;

	if (r != LOCK_OK && m->session_result == LOCK_OK) {
		m->session_result = r;
		if (r == LOCK_TOO_MANY_HOLDS)
			m->session_count = s->cap_n;
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
		      &(struct lock_extras){ .limit = e->limit }, multi_tried, m);
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
		if (a->state.added)
			e->taken = true;
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
		if (a->result == LOCK_UNCONFIRMED && !a->state.undone)
			e->taken = true;	/* it may stand: released with the rest */
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
		.extras = { .limit = e->limit },
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
	m->deadline_ms = now_ms() + m->wait_ms;
	multi_read_session(m);
}

void multilock_session_ended(struct multilock *m)
{
	m->session_ended = true;
	if (m->phase == ML_WAITING)
		acquire_cancel(&m->acq, LOCK_NOT_HELD);
}

void multilock_end(struct multilock *m, bool delivered)
{
	if (m->phase == ML_IDLE)
		return;
	if (m->phase == ML_WAITING) {	/* a closed connection under a waiting call */
		loop_cancel(m->b->loop, &m->task);
		acquire_end(&m->acq, false);
	}
	if (m->phase == ML_DONE && m->outcome == MULTI_GRANTED && !delivered) {
		for (unsigned k = 0; k < m->n; k++) {
			struct multilock_entry *e = &m->e[k];

			const struct session_holding h = { .kind = e->kind, .name = e->name,
							   .owner = m->session, .token = e->token };

			if (e->taken) {	/* released, then no longer the session's */
				locks_release(m->b, e->kind, e->name, m->session, m->principal, NULL,
					      NULL);
				sessions_forget(m->b, m->session, &h);
			}
			e->taken = false;
		}
		log_info("answer to the multi-lock of session %s was not delivered; taking it "
			 "back", m->session);
	}
	m->phase = ML_IDLE;
}
