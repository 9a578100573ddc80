/* checker.h -- continuous lock load with a grant checker, for the fault
 * suite (tests/integration/test_chaos.c).
 *
 * N client threads loop over a few names of every kind (two exclusive
 * locks, a fair lock, a read-write lock) through one or more dlockd
 * instances: acquire with wait, hold a critical section that never runs
 * past the lease the client believes in, end it, release. Every k-th round
 * of a client instead tries one of two other names once and, if it gets
 * it, holds it long, renewing with heartbeats. With semaphore_limit, a
 * fifth of the ordinary rounds take a permit of a semaphore of that limit
 * instead. With sessions, every client holds through a session of its
 * own and renews with its heartbeat. Every grant and section is recorded; the
 * check then fails on any two sections of one name that overlapped (two
 * readers excepted; on the semaphore, more than its limit at once) and on
 * any token not above every token granted before its request was sent. */
#ifndef DLOCKD_CHECKER_H
#define DLOCKD_CHECKER_H

#include <stdbool.h>
#include <stdint.h>

struct netns;

/* Figures by instance (load_opts.bases) are kept for the first this many. */
#define LOAD_MAX_BASES 4

struct load_opts {
	const char *prefix;		/* names are <prefix>-<kind><i> */
	const char *const *bases;	/* dlockd base URLs; client i starts on i % n */
	int nbases;
	int clients;			/* at least 16 in the fault suite */
	int ttl_ms;			/* lease of every acquisition */
	int wait_ms;			/* wait of every acquisition */
	int hold_max_ms;		/* an ordinary section lasts 0..this */
	int long_every;			/* every k-th round of a client holds */
	int long_ms;			/* ... this long, renewing (0: never) */
	/* Client i lives in network namespace nets[i % nnets] (netns.h) and
	 * belongs to group i % nnets; nnets 0: all in the caller's, group 0. */
	struct netns *const *nets;
	int nnets;
	/* After a 503 to an acquire or to a release, the client leaves that
	 * name alone and releases it again (DELETE with its owner id): an
	 * acquire soon (0.5 s: a call Redis ran before the 503 would hold
	 * then, unless dlockd undid it) and
	 * once more when the call can no longer take effect (2 s after the
	 * answer: a call dlockd sent runs within 1.5 s of its sending or
	 * never); a release while its lease still runs. See load_report's
	 * probes. */
	bool probe_503;
	/* > 0: ordinary rounds also take permits of semaphore <prefix>-sem0,
	 * of this limit (at most 8), which the check holds to "at most this
	 * many at once". The semaphore's count stays in Redis afterwards */
	int semaphore_limit;
	/* Each client takes its locks for a session of its own (POST
	 * /sessions with ttl_ms; every acquire with session=<id> instead of
	 * ttl_ms) and renews them with the session's heartbeat, sent once a
	 * third of ttl_ms has passed: between rounds, and instead of the
	 * lock's own heartbeat while holding long. A wait is cut to a third
	 * of ttl_ms, so that the session is heartbeated across it. A session
	 * that answers 404 is forgotten and a new one made; each client ends
	 * its session when it stops. */
	bool sessions;
};

struct load_report {
	long grants, sections;
	long overlaps;			/* sections of one name that overlapped */
	long token_regressions;		/* tokens not above an earlier grant's */
	long acq_ok, acq_refused, acq_unavailable, acq_conn_failed, acq_other;
	long hb_ok, hb_not_held, hb_failed;
	long lost, ran_out;		/* sections ended by not_held / lease end */
	/* sections granted before the event began and still holding when it
	 * ended, by the first definite answer to a heartbeat sent after it */
	long straddled, straddled_kept, straddled_lost;
	/* of the four contended names, after the event ended */
	long grants_after_event;
	int64_t max_gap_after_event_ms;	/* longest grant-less stretch of a name */
	const char *max_gap_kind;	/* ... of which: "lock0", "fair0", ...; "" if none */
	/* granted while the event lasted, all and by instance */
	long grants_during_event, grants_during_event_by_base[LOAD_MAX_BASES];
	/* probe_503: the releases sent after a 503 that got a definite
	 * answer; those that showed the 503'd call took effect (an acquire
	 * answered 503 that held the lock after all; a release answered 503
	 * that had freed it while its lease still ran); those that had no
	 * definite answer (still 503 at the end, or the client stopped) */
	long probes, probe_503_effects, probes_unresolved;
	long handoffs_cross;		/* waiter granted via another instance */
	/* sessions: made; heartbeats answered 200, 404 (ended), neither;
	 * acquires answered 404 (the session had ended); sessions made before
	 * the event begun, by the first 200 or 404 to a heartbeat sent after
	 * it ended: kept, or ended (never renewed past their lease) */
	long sess_made, sess_hb_ok, sess_hb_ended, sess_hb_failed, acq_no_session;
	long sess_straddled, sess_straddled_kept, sess_straddled_ended;
	int64_t handoff_p50_ms, handoff_p99_ms, handoff_max_ms;
};

struct load;

/* The load is the harness's: if the test returns (a failed CHECK) without
 * load_free, the runner stops and frees it before the next test. */
struct load *load_start(const struct load_opts *o);
/* The fault starts / is over (mono_ms() now); one event per load. */
void load_event_begin(struct load *l);
void load_event_end(struct load *l);
/* Sections holding long right now (to fault them mid-hold). */
int load_long_holders(struct load *l);
/* Clients of group (load_opts.nets) with an acquire under way, and
 * holding long (heartbeating), right now. */
void load_doing(struct load *l, int group, int *acquiring, int *holding_long);
/* Stop the clients of group and join them: requests under way give up
 * within about a second (a client that stops waiting for a network that
 * is gone), a section under way ends at once. The others go on. */
void load_stop_group(struct load *l, int group);
/* Grants so far. */
long load_grants(struct load *l);
/* Stop the clients (each finishes its round) and join them; once. */
void load_stop(struct load *l);
/* Check what was recorded. With loss_excused (Redis lost its data in the
 * event), a section granted before the event counts only up to it: a holder
 * that goes on past the loss is what fencing tokens are for, and the tokens
 * are still checked. */
void load_check(struct load *l, bool loss_excused, struct load_report *rep);
/* One line of figures, for the test log and tests/RELIABILITY.md. */
void load_print(const char *what, const struct load_report *rep);
/* Stops it first if need be. */
void load_free(struct load *l);

#endif
