/* test_session_probe.c -- hostile probes of sessions (issue 30), each the
 * smallest reproduction of a fault found by attacking them as a careless
 * or hostile client, or an unlucky operator, would. Each fails until its
 * fault is fixed; the comment above each says what it shows, what was
 * observed and what is expected. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* POST /sessions?ttl_ms= on d (NULL: H_dlockd); id gets its id ("" when it failed). */
static void probe_session(const struct dlockd_srv *d, int ttl_ms, char id[40])
{
	if (!session_start_on(d ? d->base : NULL, ttl_ms, id))
		id[0] = '\0';
}

/* A holding taken twice for a session with reentrant=true was recorded
 * once (holds 2), and DELETE /sessions/{id} released one hold: the lock
 * stayed held until its lease end, renewed by nobody, and its waiters
 * were not served at the end. A session holds a lock once: reentrant=true
 * with session= is refused (400) and adds nothing, and the session's end
 * frees every lock it took. */
TEST(session_probe_reentrant_holding_survives_delete)
{
	static const char *const res[] = { "/locks/%s", "/fairlocks/%s", "/rwlocks/%s/read",
					   "/rwlocks/%s/write" };
	const char *n = lockname("sp-reent");
	char id[40], nm[160], q[300];

	probe_session(NULL, 30000, id);
	CHECK(id[0], "POST /sessions");
	for (size_t i = 0; i < 4; i++) {
		snprintf(nm, sizeof(nm), "%s%zu", n, i);
		snprintf(q, sizeof(q), res[i], nm);
		CHECK(status_of(NULL, "PUT", "%s?session=%s", q, id) == 200,
		      "the session takes %s", q);
		CHECK(status_of(NULL, "PUT", "%s?session=%s&reentrant=true", q, id) == 400,
		      "reentrant=true with a session is refused (%s)", q);
		CHECK(status_of(NULL, "PUT", "%s?session=%s", q, id) == 200,
		      "a repeat without it is the same holding (%s)", q);
	}
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "DELETE the session");
	CHECK(status_of(NULL, "PUT", "/locks/%s0?owner=other&ttl_ms=1000", n) == 200,
	      "the lock is free once its session ended");
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s1?owner=other&ttl_ms=1000", n) == 200,
	      "the fair lock is free once its session ended");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s2/write?owner=other&ttl_ms=1000", n) == 200,
	      "the read lock is free once its session ended");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s3/write?owner=other&ttl_ms=1000", n) == 200,
	      "the write lock is free once its session ended");
}

/* A session's holding released on its own (DELETE /locks/{name}?owner=,
 * as the guide allows) and taken again outside the session by the same
 * owner, with its own 60 s lease: the session still names it (the
 * heartbeat and the end match kind, name and owner, never the fencing
 * token), so the next heartbeat cuts the new holding's lease to the
 * session's ttl_ms and DELETE /sessions/{id} releases it. Observed: lease
 * 60 s -> 2 s at the heartbeat, the lock freed by the session's end.
 * Expected: the heartbeat drops the old holding (its token is gone) and
 * leaves the new one alone; ending the session does not touch it. */
TEST(session_probe_retaken_lock_is_cut_and_freed_by_the_old_session)
{
	const char *n = lockname("sp-retake");
	char id[40];

	probe_session(NULL, 2000, id);
	CHECK(id[0], "POST /sessions");
	CHECK(status_of(NULL, "PUT", "/locks/%s?session=%s&owner=w1", n, id) == 200,
	      "the session takes the lock as owner w1");
	CHECK(status_of(NULL, "DELETE", "/locks/%s?owner=w1", n) == 200,
	      "w1 releases it on its own");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=w1&ttl_ms=60000", n) == 200,
	      "w1 takes it again, outside the session, for 60 s");
	CHECK(status_of(NULL, "POST", "/sessions/%s/heartbeat", id) == 200, "heartbeat");
	CHECK(rcmd_int("PTTL %s", n) > 30000, "the new holding keeps its 60 s lease: PTTL %lld ms",
	      rcmd_int("PTTL %s", n));
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end the session");
	CHECK(rcmd_int("EXISTS %s", n) == 1, "the lock w1 took outside the session is still held");
	lock_release(&H_dlockd, n, "w1");
}

/* The same, ended with no heartbeat in between: the session's end
 * released the lock its owner had taken again outside the session.
 * Expected: the end releases only holdings whose fencing token is the
 * one the session recorded. */
TEST(session_probe_end_leaves_a_lock_retaken_outside)
{
	const char *n = lockname("sp-retake-end");
	char id[40];

	probe_session(NULL, 30000, id);
	CHECK(id[0], "POST /sessions");
	CHECK(status_of(NULL, "PUT", "/locks/%s?session=%s&owner=w1", n, id) == 200,
	      "the session takes the lock as owner w1");
	CHECK(lock_release(&H_dlockd, n, "w1") == 200, "w1 releases it on its own");
	CHECK(lock_hold(&H_dlockd, n, "w1", 60000), "w1 takes it again, outside the session");
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end the session");
	CHECK(rcmd_int("EXISTS %s", n) == 1, "the lock w1 took outside the session is still held");
	lock_release(&H_dlockd, n, "w1");
}

/* Does session id on d list a holding named name? -1 when GET fails. */
static int lists_holding(const struct dlockd_srv *d, const char *id, const char *name)
{
	struct http_resp r;
	char p[80];
	json_t *h, *it;
	size_t i;
	int found = 0;

	snprintf(p, sizeof(p), "/sessions/%s", id);
	if (http_on(d ? d->base : H_dlockd.base, "GET", p, NULL, &r) != 0 || r.status != 200) {
		http_free(&r);
		return -1;
	}
	h = json_object_get(r.json, "holdings");
	json_array_foreach(h, i, it)
		if (!strcmp(json_string_value(json_object_get(it, "name")) ?: "", name))
			found = 1;
	http_free(&r);
	return found;
}

/* One holding recorded by two sessions: with owner=w, session B's acquire
 * of a lock session A holds is a repeat of A's grant (same owner, same
 * fencing token) and B records it too. Ending A releases it, while B
 * still lists it as its own and lives: another client takes the lock as
 * B's user believes it holds it. Observed: after A's DELETE, B lists the
 * lock and "other" is granted it. Expected: a holding belongs to at most
 * one session (B's acquire refused, 409), or ending A leaves it held. */
TEST(session_probe_one_holding_in_two_sessions)
{
	const char *n = lockname("sp-two");
	char a[40], b[40];

	probe_session(NULL, 30000, a);
	probe_session(NULL, 30000, b);
	CHECK(a[0] && b[0], "two sessions");
	CHECK(status_of(NULL, "PUT", "/locks/%s?session=%s&owner=w", n, a) == 200,
	      "session A takes the lock as owner w");
	CHECK(status_of(NULL, "PUT", "/locks/%s?session=%s&owner=w", n, b) == 409,
	      "session B's acquire with A's owner is refused: not B's holding");
	CHECK(lists_holding(NULL, b, n) == 0, "B records nothing");
	CHECK(lists_holding(NULL, a, n) == 1, "A still has it");
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", b) == 200, "end session B");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=other&ttl_ms=1000", n) == 409,
	      "B's end released nothing of A's: the lock is still held");
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", a) == 200, "end session A");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=other&ttl_ms=1000", n) == 200,
	      "A's end released it");
}

/* A holdings member this dlockd cannot read (a kind a newer dlockd records
 * during a rolling upgrade, or any garbage) poisons the session: every
 * heartbeat answers 500 but has renewed the session and none of its
 * holdings, which run out while the session lives on; DELETE answers 500
 * but has ended the session, and releases nothing. Observed: after two
 * heartbeats over 1.5x the ttl the lock is free (session still there), and
 * DELETE leaves the lock held. Expected: a member it cannot read is
 * skipped (or dropped) and the others are renewed and released as ever. */
TEST(session_probe_an_unreadable_member_poisons_heartbeat_and_end)
{
	const char *n = lockname("sp-poison");
	char id[40];
	int64_t start;
	long st = 0;

	probe_session(NULL, 1000, id);
	CHECK(id[0], "POST /sessions");
	CHECK(status_of(NULL, "PUT", "/locks/%s?session=%s", n, id) == 200, "the session takes it");
	CHECK(rcmd_int("SADD dlockd_session:{%s}:holdings %s", id,
		       "multi\tsp-poison-x\tw\t7") == 1, "a member of a kind this dlockd lacks");
	start = mono_ms();
	while (mono_ms() - start < 2500) {
		st = status_of(NULL, "POST", "/sessions/%s/heartbeat", id);
		sleep_ms(250);	/* heartbeats at a quarter of the ttl, the wait under test */
	}
	CHECK(rcmd_int("EXISTS %s", n) == 1, "the lock is kept by the heartbeats (the last "
	      "answered %ld; the session has %lld ms left)", st,
	      rcmd_int("PTTL dlockd_session:{%s}", id));
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "DELETE the session");
	CHECK(rcmd_int("EXISTS %s", n) == 0, "the session's end released the lock");
}

static void stop_dlockd(void *arg)
{
	dlockd_stop(arg, 5000);
}

/* A heartbeat racing an acquire for the same session: the acquire reads
 * the session's lease left (small: the session is near its end), the
 * heartbeat renews the session to its ttl_ms and the holdings it has so
 * far, then the acquire takes its lock with the small lease it read and
 * records it. Nothing renews that lock (a grant without wait_ms is never
 * set to the session's lease after the record), so it runs out while the
 * session lives and lists it: another owner is granted the lock. The race
 * is made certain with one dlockd thread (one pipelined Redis connection:
 * the acquire's read goes first) and Redis stopped for 400 ms while both
 * are sent. Observed: the lock lasts ~600 ms, the session 4 s, "other" is
 * granted it at 1.5 s. Expected: the holding lives as long as the session. */
TEST(session_probe_heartbeat_racing_an_acquire_leaves_it_short)
{
	static const char *const one_thread[] = { "--threads", "1", NULL };
	static struct redis_srv rs;
	static struct dlockd_srv d;
	const char *n = lockname("sp-race");
	char id[40], p[300];
	struct bg take, beat;
	long other;
	int listed;

	memset(&rs, 0, sizeof(rs));
	CHECK(redis_dlockd_start(&rs, &d, one_thread) == 0, "start Redis and dlockd --threads 1");
	test_at_end(stop_dlockd, &d);
	probe_session(&d, 4000, id);
	CHECK(id[0], "POST /sessions");
	sleep_ms(3000);		/* the session near its end: ~1 s left, the wait under test */
	kill(rs.pid, SIGSTOP);
	snprintf(p, sizeof(p), "/locks/%s?session=%s", n, id);
	bg_start_on(&take, d.base, "PUT", p, NULL);
	sleep_ms(200);		/* the acquire's read is sent first (Redis stopped) */
	snprintf(p, sizeof(p), "/sessions/%s/heartbeat", id);
	bg_start_on(&beat, d.base, "POST", p, NULL);
	sleep_ms(200);		/* then the heartbeat's; 400 ms stall, within the deadlines */
	kill(rs.pid, SIGCONT);
	bg_join(&take);
	bg_join(&beat);
	CHECK_STATUS(take.r, 200, "the session's acquire");
	CHECK_STATUS(beat.r, 200, "the heartbeat");
	http_free(&take.r);
	http_free(&beat.r);
	sleep_ms(1500);		/* past the lease the acquire read, well within the session's */
	listed = lists_holding(&d, id, n);
	snprintf(p, sizeof(p), "/locks/%s?owner=other&ttl_ms=1000", n);
	other = status_of(&d, "PUT", "%s", p);
	CHECK(!(listed == 1 && other == 200), "the live session lists the lock (%d) while another "
	      "owner is granted it (%ld)", listed, other);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A heartbeat costs one script per holding, and nothing caps how often a
 * client sends it: one client with a full session (256 holdings, the
 * default cap) heartbeating on 16 connections keeps Redis running one
 * script a holding (by hand, 8 curl loops: 54 heartbeats/s, ~14,000
 * scripts/s), and every other client's calls wait behind them.
 * Observed (2 loaded cores): a bystander's plain PUT, 0.7 ms median idle,
 * takes 70-96 ms median, 182-257 ms p90 during the flood. Expected: no client
 * can make another's calls slow (a session's heartbeats rate-limited or
 * coalesced, or the cost of one capped). */
TEST(session_probe_heartbeat_flood_of_a_full_session_slows_everyone)
{
	const char *n = lockname("sp-flood");
	char id[40], p[300];
	struct bg hb[16];
	double ms[40];
	struct http_resp r;

	probe_session(NULL, 60000, id);
	CHECK(id[0], "POST /sessions");
	for (int i = 0; i < 256; i++)
		CHECK(status_of(NULL, "PUT", "/locks/%s-%d?session=%s", n, i, id) == 200,
		      "holding %d", i);
	snprintf(p, sizeof(p), "/sessions/%s/heartbeat", id);
	for (int j = 0; j < 16; j++)
		bg_start(&hb[j], "POST", p, NULL);
	for (int k = 0; k < 40; k++) {
		int64_t next = mono_ms() + 50;	/* a sample each 50 ms */

		while (mono_ms() < next) {
			for (int j = 0; j < 16; j++)
				if (hb[j].done_ms) {	/* keep 16 heartbeats in flight */
					bg_join(&hb[j]);
					http_free(&hb[j].r);
					bg_start(&hb[j], "POST", p, NULL);
				}
			sleep_ms(1);
		}
		http("PUT", "/locks/sp-flood-bystander?owner=b&ttl_ms=1000", NULL, &r);
		ms[k] = r.ms;
		http_free(&r);
	}
	for (int j = 0; j < 16; j++) {
		bg_join(&hb[j]);
		http_free(&hb[j].r);
	}
	status_of(NULL, "DELETE", "/sessions/%s", id);
	qsort(ms, 40, sizeof(ms[0]), cmp_double);
	printf("# bystander PUT during the flood: median %.1f ms, p90 %.1f ms, p95 %.1f ms\n",
	       ms[20], ms[36], ms[38]);
	CHECK(ms[36] < 50.0 * slow_factor(), "a bystander's PUT takes %.1f ms (p90) while one "
	      "client heartbeats its full session; want < 50 ms", ms[36]);
}

/* An acquire for a session waits; the session is ended (DELETE) while it
 * waits. It keeps waiting its whole wait_ms, as a waiter (a fair lock's
 * queue place) of a session that is gone, and then answers 409 locked:
 * the client never hears that its session ended. Observed: 409 locked
 * after the full 4 s. Expected (docs/guides/sessions.md: "if the session
 * ended while it waited, it answers 404 session_not_found"): 404 at once
 * (well within the wait) once the session is ended. */
TEST(session_probe_waiting_acquire_outlives_its_ended_session)
{
	const char *n = lockname("sp-waitend");
	char id[40], p[300];
	struct bg w;
	int64_t t0;

	probe_session(NULL, 30000, id);
	CHECK(id[0], "POST /sessions");
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=h&ttl_ms=30000", n) == 200, "h holds");
	snprintf(p, sizeof(p), "/fairlocks/%s?session=%s&wait_ms=4000", n, id);
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_waiters(NULL, 1, 5000), "the session's acquire waits");
	t0 = mono_ms();
	CHECK(status_of(NULL, "DELETE", "/sessions/%s", id) == 200, "end the session");
	bg_join(&w);
	status_of(NULL, "DELETE", "/fairlocks/%s?owner=h", n);
	CHECK(w.r.status == 404 && w.done_ms - t0 < 1500 * slow_factor(),
	      "the acquire answers %ld %s %lld ms after its session ended; want 404 "
	      "session_not_found within 1500 ms", w.r.status, json_str(&w.r, "error"),
	      (long long)(w.done_ms - t0));
	http_free(&w.r);
}

/* A refused acquire for a session gives back what it took, by releasing
 * as its owner; but a grant to an owner that held the lock already is a
 * repeat (holds 1, same fencing token), so the give-back releases the
 * owner's own earlier holding. A full session (--max-session-holdings 1)
 * makes it certain. Observed: 409 session_full ("nothing was taken"), and
 * w's 60 s lock, taken outside the session before, is gone. Expected: a
 * refused acquire leaves what the owner held before as it was (refused as
 * not_owner now: w holds it outside the session, which is checked with
 * the cap in one script). */
TEST(session_probe_refused_session_acquire_frees_the_owners_own_lock)
{
	static const char *const flags[] = { "--max-session-holdings", "1", NULL };
	static struct dlockd_srv d;
	const char *n = lockname("sp-giveback");
	char id[40], p[300];
	struct http_resp r;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "dlockd --max-session-holdings 1");
	test_at_end(stop_dlockd, &d);
	probe_session(&d, 30000, id);
	CHECK(id[0], "POST /sessions");
	CHECK(status_of(&d, "PUT", "/locks/%s-a?session=%s", n, id) == 200, "the session is full");
	CHECK(status_of(&d, "PUT", "/locks/%s?owner=w&ttl_ms=60000", n) == 200,
	      "w holds the lock for 60 s, outside any session");
	snprintf(p, sizeof(p), "/locks/%s?session=%s&owner=w", n, id);
	CHECK(http_on(d.base, "PUT", p, NULL, &r) == 0, "PUT");
	CHECK_ERROR(r, 409, "not_owner", "w's acquire for the full session");
	http_free(&r);
	CHECK(rcmd_int("PTTL %s", n) > 30000, "w's own lock is still held (PTTL %lld)",
	      rcmd_int("PTTL %s", n));
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}
