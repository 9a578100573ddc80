/* test_dlock_multi.c -- `dlock run a,b,c -- COMMAND`: several locks taken
 * all or none through one session of the suite's dlockd. Both are held
 * while the command runs and released after; a lock in the way means
 * none is held, while waiting too; runs over overlapping names never
 * overlap and never deadlock; losing any one stops the command (75);
 * lists dlock cannot take are usage errors. */
#include "../harness/dlock_cli.h"
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "x,y" of two fresh lock names into buf, each also in a and b. */
static const char *two_names(char *buf, size_t len, char *a, char *b, const char *hint)
{
	snprintf(a, 200, "%.150s", lockname(hint));
	snprintf(b, 200, "%.150s-b", a);
	snprintf(buf, len, "%s,%s", a, b);
	return buf;
}

TEST(dlock_run_takes_several_locks_through_one_session)
{
	char list[420], a[200], b[200], tokens[600];
	struct proc p;
	int code;

	two_names(list, sizeof(list), a, b, "multi-env");
	dlock_start(&p, NULL, NULL, "multienv", "run", list, "--", "sh", "-c",
		    "echo \"$DLOCK_NAME|$DLOCK_FENCING_TOKENS|$DLOCK_FENCING_TOKEN|$DLOCK_OWNER|"
		    "$DLOCK_SESSION\"; sleep 1", NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", a) == 1 &&
		       flag_of(NULL, "locked", "/locks/%s", b) == 1, 10000),
	      "both locks held while the command runs: %s", dlock_err(&p));
	CHECK((code = dlock_wait(&p)) == 0, "exit 0, got %d: %s", code, dlock_err(&p));
	{
		char owner[200] = "", session[200] = "", want[1400];
		long long ta = 0, tb = 0, first = 0;

		snprintf(tokens, sizeof(tokens), "%s", dlock_out(&p));
		snprintf(want, sizeof(want), "%s|%s=%%lld,%s=%%lld|%%lld|%%199[^|]|%%199s", list, a,
			 b);
		CHECK(sscanf(tokens, want, &ta, &tb, &first, owner, session) == 5,
		      "DLOCK_NAME|DLOCK_FENCING_TOKENS|DLOCK_FENCING_TOKEN|DLOCK_OWNER|"
		      "DLOCK_SESSION: '%s'", tokens);
		CHECK(ta > 0 && tb > 0 && first == ta, "tokens %lld %lld, first %lld", ta, tb, first);
		CHECK(strlen(owner) == 32 && !strcmp(owner, session),
		      "DLOCK_OWNER is DLOCK_SESSION, a session id: '%s'", tokens);
	}
	CHECK(flag_of(NULL, "locked", "/locks/%s", a) == 0 &&
	      flag_of(NULL, "locked", "/locks/%s", b) == 0, "both released after the run");

	/* every kind dlock has: here the read side of two read-write locks */
	two_names(list, sizeof(list), a, b, "multi-read");
	dlock_start(&p, NULL, NULL, "multiread", "run", "--kind", "rwlock", "--mode", "read",
		    list, "--", "sh", "-c", "echo \"$DLOCK_KIND $DLOCK_MODE\"", NULL);
	CHECK(dlock_wait(&p) == 0 && !strcmp(dlock_out(&p), "rwlock read\n"),
	      "two read locks: '%s' %s", dlock_out(&p), dlock_err(&p));
	two_names(list, sizeof(list), a, b, "multi-sem");
	dlock_start(&p, NULL, NULL, "multisem", "run", "--limit", "2", list, "--", "true", NULL);
	CHECK(dlock_wait(&p) == 0, "two semaphores' permits: %s", dlock_err(&p));
}

TEST(dlock_run_of_several_holds_none_while_one_is_in_the_way)
{
	char list[420], a[200], b[200];
	struct proc p;
	int64_t t0;
	int code;

	two_names(list, sizeof(list), a, b, "multi-block");
	CHECK(lock_hold(NULL, b, "blocker", 60000), "the blocker holds b");
	dlock_start(&p, NULL, NULL, "multiblock", "run", "--wait", "1s", list, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 1 && strstr(dlock_err(&p), b),
	      "not acquired within --wait: 1, naming b (%d: %s)", code, dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", a) == 0, "and a is not held");

	/* waiting longer than a third of the lease (its long polls, with the
	 * session's heartbeat between them): nothing held meanwhile, served
	 * when b is released */
	dlock_start(&p, NULL, NULL, "multiwait", "run", "--ttl", "3s", list, "--", "true", NULL);
	CHECK(wait_waiters(NULL, 1, 10000), "the run waits");
	sleep_ms(2500);
	CHECK(flag_of(NULL, "locked", "/locks/%s", a) == 0, "a is not held while the run waits");
	t0 = mono_ms();
	CHECK(lock_release(NULL, b, "blocker") == 200, "the blocker releases b");
	CHECK((code = dlock_wait(&p)) == 0, "served once b is free: %d %s", code, dlock_err(&p));
	printf("# served %lld ms after b's release\n", (long long)(mono_ms() - t0));
	CHECK(mono_ms() - t0 < 2000LL * slow_factor(), "at once, not at a poll: %lld ms",
	      (long long)(mono_ms() - t0));
	CHECK(flag_of(NULL, "locked", "/locks/%s", a) == 0 &&
	      flag_of(NULL, "locked", "/locks/%s", b) == 0, "both released after the run");
}

TEST(dlock_runs_over_overlapping_names_never_overlap_nor_deadlock)
{
	enum { RUNS = 6 };
	static const char *const sets[RUNS] = { "%1$s-a,%1$s-b", "%1$s-b,%1$s-c",
						"%1$s-c,%1$s-a", "%1$s-c,%1$s-b,%1$s-a",
						"%1$s-a,%1$s-c", "%1$s-b,%1$s-a" };
	const char *base = lockname("multi-overlap");
	char dir[400], bad[450], script[1200], list[RUNS][700];
	struct proc p[RUNS];

	snprintf(dir, sizeof(dir), "%s/%s", test_tmpdir(), base);
	CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
	snprintf(bad, sizeof(bad), "%s/OVERLAP", dir);
	/* inside, each name of the run is a directory only it may make:
	 * mkdir fails if another run holding that name is inside too */
	snprintf(script, sizeof(script),
		 "cd %s && for i in 1 2 3; do for n in $(echo $DLOCK_NAME | tr , ' '); do "
		 "mkdir $n || echo $n >> OVERLAP; done; sleep 0.1; "
		 "for n in $(echo $DLOCK_NAME | tr , ' '); do rmdir $n; done; done", dir);
	for (int i = 0; i < RUNS; i++) {
		snprintf(list[i], sizeof(list[i]), sets[i], base);
		dlock_start(&p[i], NULL, NULL, "overlap", "run", "--ttl", "5s", list[i], "--",
			    "sh", "-c", script, NULL);
	}
	for (int i = 0; i < RUNS; i++) {
		int code = dlock_wait(&p[i]);

		CHECK(code == 0, "run %d (%s) exits 0, got %d: %s", i, list[i], code,
		      dlock_err(&p[i]));
	}
	CHECK(access(bad, F_OK) != 0, "two runs held one name at once");
}

TEST(dlock_run_of_several_stops_when_any_one_is_lost)
{
	char list[420], a[200], b[200], path[300];
	struct proc p;
	int64_t t0;
	int code;

	two_names(list, sizeof(list), a, b, "multi-lost");
	dlock_start(&p, NULL, NULL, "multilost", "run", "--ttl", "3s", "--grace", "500ms", list,
		    "--", "sleep", "30", NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", b) == 1, 10000), "b is held: %s",
	      dlock_err(&p));
	t0 = mono_ms();
	snprintf(path, sizeof(path), "/locks/%s?force=true", b);
	CHECK(status_of(NULL, "DELETE", "%s", path) == 200, "b is forced free");
	CHECK((code = dlock_wait(&p)) == 75 && strstr(dlock_err(&p), b),
	      "the command is stopped, the lease lost: 75 naming b (%d: %s)", code, dlock_err(&p));
	printf("# stopped %lld ms after b was forced free\n", (long long)(mono_ms() - t0));
	CHECK(flag_of(NULL, "locked", "/locks/%s", a) == 0, "and a is released");
}

/* Found by a probe: dlockd stalled (SIGSTOP) for longer than --ttl while
 * dlock waited for a lock in the way; the session's heartbeats could not
 * keep it, and dlock gave up as if a lease had been lost (75: "404
 * session_not_found"), though nothing was held and its command never ran.
 * A single name's wait goes on through such a stall; several names' now
 * too, with a new session. */
TEST(dlock_run_of_several_waits_on_through_a_stall_longer_than_its_ttl)
{
	struct redis_srv rs = { 0 };
	char list[420], a[200], b[200];
	struct dlockd_srv d;
	struct proc p;
	int code;

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "start Redis and dlockd");
	two_names(list, sizeof(list), a, b, "multi-stall");
	CHECK(lock_hold(&d, b, "blocker", 60000), "the blocker holds b");
	dlock_start(&p, d.base, NULL, "multistall", "run", "--ttl", "1500ms", list, "--", "echo",
		    "RAN", NULL);
	CHECK(WAIT_FOR(waiters_of(&d) == 1, 10000), "dlock waits: %s", dlock_err(&p));
	kill(d.pid, SIGSTOP);
	sleep_ms(2500);		/* past the session's 1.5 s lease */
	kill(d.pid, SIGCONT);
	CHECK(WAIT_FOR(strstr(dlock_err(&p), "waiting on with a new one") &&
		       waiters_of(&d) == 1, 10000),
	      "dlock waits on, with a new session: %s", dlock_err(&p));
	CHECK(lock_release(&d, b, "blocker") == 200, "the blocker lets go");
	CHECK((code = dlock_wait(&p)) == 0 && !strcmp(dlock_out(&p), "RAN\n"),
	      "the command ran: exit %d, '%s' (%s)", code, dlock_out(&p), dlock_err(&p));
	CHECK(flag_of(&d, "locked", "/locks/%s", a) == 0 && flag_of(&d, "locked", "/locks/%s", b) == 0,
	      "both released after the run");
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "clean exit");
}

TEST(dlock_run_refuses_lists_it_cannot_take)
{
	static const char *const bad[][3] = {
		{ "a1,a1", "given twice", NULL },
		{ "a1,,b1", "must be", NULL },
		{ "a1,b 1", "must be", NULL },
	};
	struct proc p;
	int code;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dlock_start(&p, NULL, NULL, "multibad", "run", bad[i][0], "--", "true", NULL);
		CHECK((code = dlock_wait(&p)) == 64 && strstr(dlock_err(&p), bad[i][1]),
		      "'%s': 64 saying '%s' (%d: %s)", bad[i][0], bad[i][1], code, dlock_err(&p));
	}
	dlock_start(&p, NULL, NULL, "multiowner", "run", "--owner", "me", "a1,b1", "--", "true",
		    NULL);
	CHECK((code = dlock_wait(&p)) == 64 && strstr(dlock_err(&p), "--owner"),
	      "--owner with several names: 64 (%d: %s)", code, dlock_err(&p));
	dlock_start(&p, NULL, NULL, "multiacq", "acquire", "a1,b1", NULL);
	CHECK((code = dlock_wait(&p)) == 64 && strstr(dlock_err(&p), "dlock run"),
	      "acquire of several names: 64 (%d: %s)", code, dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/a1") == 0, "nothing taken");
}
