/* test_dlock.c -- the dlock CLI (cli/) against the suite's dlockd: `dlock
 * run` passes the command's status through, never lets two runs overlap,
 * hands the lock on at once, stops the command inside its lease when
 * renewals stop (a dead or stalled dlockd) and within the grace when the
 * lock is force-released, refuses a grace the lease has no room for,
 * forwards signals to the command's whole group, gives back a queue place
 * when interrupted, and keeps the token off every command line; and the
 * subcommands a script uses across steps (acquire, renew, release,
 * status, list). */
#include "../harness/dlock_cli.h"
#include "../harness/harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A file in the run's directory, named after hint. */
static const char *tmpfile_named(char *buf, size_t len, const char *hint)
{
	snprintf(buf, len, "%s/%s", test_tmpdir(), lockname(hint));
	return buf;
}

/* The number on the first line of path, 0 if none yet. */
static long long number_in(const char *path)
{
	char buf[64];

	return atoll(file_read(path, buf, sizeof(buf)));
}

/* Does any process of the machine (that we may read) have s on its
 * command line? */
static bool on_a_command_line(const char *s)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	bool seen = false;

	while (proc && !seen && (e = readdir(proc))) {
		char path[300], buf[8192];
		size_t n;
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < n; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[n] = '\0';
		seen = strstr(buf, s) != NULL;
	}
	if (proc)
		closedir(proc);
	return seen;
}

TEST(dlock_run_passes_the_commands_status_through)
{
	const char *n = lockname("dlock-status");
	struct proc p;
	int code;

	dlock_start(&p, NULL, NULL, "exit7", "run", n, "--", "sh", "-c", "exit 7", NULL);
	CHECK((code = dlock_wait(&p)) == 7, "the command's exit status: %d; %s", code, dlock_err(&p));
	dlock_start(&p, NULL, NULL, "term", "run", n, "--", "sh", "-c", "kill -TERM $$", NULL);
	CHECK((code = dlock_wait(&p)) == 128 + SIGTERM, "killed by SIGTERM: 143, got %d; %s", code,
	      dlock_err(&p));
	dlock_start(&p, NULL, NULL, "env", "run", "--kind", "lock", n, "--", "sh", "-c",
		    "echo \"$DLOCK_NAME $DLOCK_KIND $DLOCK_FENCING_TOKEN $DLOCK_OWNER\"", NULL);
	CHECK(dlock_wait(&p) == 0, "a command that succeeds: 0; %s", dlock_err(&p));
	{
		char name[200] = "", kind[16] = "", owner[200] = "";
		long long token = 0;

		CHECK(sscanf(dlock_out(&p), "%199s %15s %lld %199s", name, kind, &token, owner) == 4 &&
		      !strcmp(name, n) && !strcmp(kind, "lock") && token > 0 && owner[0],
		      "DLOCK_NAME, DLOCK_KIND, DLOCK_FENCING_TOKEN, DLOCK_OWNER: '%s'", dlock_out(&p));
	}
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "released after each run");
	dlock_start(&p, NULL, NULL, "rwenv", "run", "--kind", "rwlock", "--mode", "read", n, "--",
		    "sh", "-c", "echo \"$DLOCK_KIND $DLOCK_MODE\"", NULL);
	CHECK(dlock_wait(&p) == 0 && !strcmp(dlock_out(&p), "rwlock read\n"),
	      "--kind rwlock --mode read: DLOCK_KIND and DLOCK_MODE say so: '%s' %s", dlock_out(&p),
	      dlock_err(&p));
	dlock_start(&p, NULL, NULL, "badmode", "run", "--mode", "read", n, "--", "true", NULL);
	CHECK(dlock_wait(&p) == 64 && strstr(dlock_err(&p), "--kind rwlock"),
	      "--mode without --kind rwlock is a usage error: %s", dlock_err(&p));

	dlock_start(&p, NULL, NULL, "nocmd", "run", n, "--", "no-such-command-dlock", NULL);
	CHECK((code = dlock_wait(&p)) == 127 && strstr(dlock_err(&p), n) &&
	      strstr(dlock_err(&p), "no-such-command-dlock"),
	      "a command that is not there: 127 and a message naming lock and command (%d: %s)",
	      code, dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "and the lock is released");
}

TEST(dlock_conflicts_usage_and_unreachable_have_their_codes)
{
	const char *n = lockname("dlock-codes");
	char down[64];
	struct proc p;
	int64_t t0;
	int code;

	CHECK(lock_hold(NULL, n, "other", 30000), "another owner holds it");
	dlock_start(&p, NULL, NULL, "n", "run", "-n", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 1 && strstr(dlock_err(&p), n) &&
	      strstr(dlock_err(&p), "held by another owner"),
	      "-n on a held lock: 1, saying so (%d: %s)", code, dlock_err(&p));
	dlock_start(&p, NULL, NULL, "E", "run", "-n", "-E", "42", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 42, "-E 42: 42, got %d", code);
	t0 = mono_ms();
	dlock_start(&p, NULL, NULL, "wait", "run", "--wait", "700ms", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 1 && mono_ms() - t0 >= 650,
	      "--wait 700ms: 1 after the wait (%d after %lld ms)", code,
	      (long long)(mono_ms() - t0));
	CHECK(lock_release(NULL, n, "other") == 200, "release");

	dlock_start(&p, NULL, NULL, "usage1", "run", NULL);
	CHECK((code = dlock_wait(&p)) == 64, "no NAME: 64, got %d", code);
	dlock_start(&p, NULL, NULL, "usage2", "run", "--ttl", "soon", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 64 && strstr(dlock_err(&p), "--ttl 'soon'"),
	      "a bad duration: 64 naming it (%d: %s)", code, dlock_err(&p));
	dlock_start(&p, NULL, NULL, "usage3", "run", "bad/name", "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 64, "a bad name: 64, got %d", code);
	dlock_start(&p, NULL, NULL, "usage4", "frobnicate", NULL);
	CHECK((code = dlock_wait(&p)) == 64, "an unknown command: 64, got %d", code);
	dlock_start(&p, NULL, NULL, "usage5", "run", n, NULL);
	CHECK((code = dlock_wait(&p)) == 64, "no COMMAND: 64, got %d", code);
	/* SIGTERM comes a grace before the lease ends: at most half of it */
	dlock_start(&p, NULL, NULL, "usage6", "run", "--ttl", "3s", "--grace", "1501ms", n, "--",
		    "true", NULL);
	CHECK((code = dlock_wait(&p)) == 64 && strstr(dlock_err(&p), "--grace 1501ms") &&
	      strstr(dlock_err(&p), "half of --ttl 3000ms") && strstr(dlock_err(&p), "at most 1500ms"),
	      "a grace over half the lease: 64 saying why (%d: %s)", code, dlock_err(&p));
	dlock_start(&p, NULL, NULL, "grace-half", "run", "-n", "--ttl", "3s", "--grace", "1.5s", n,
		    "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 0, "a grace of half the lease runs (%d: %s)", code,
	      dlock_err(&p));
	/* the default grace (5 s) shortened to a third of a short lease */
	dlock_start(&p, NULL, NULL, "grace-default", "run", "-n", "--ttl", "1s", n, "--", "true",
		    NULL);
	CHECK((code = dlock_wait(&p)) == 0, "--ttl 1s with the default grace runs (%d: %s)", code,
	      dlock_err(&p));

	snprintf(down, sizeof(down), "http://127.0.0.1:%d", free_port());
	dlock_start(&p, down, NULL, "down", "run", "-n", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 69 && strstr(dlock_err(&p), "cannot reach dlockd"),
	      "nothing listening: 69 and why (%d: %s)", code, dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "nothing is held");
}

/* Commands that write "S <ns>" when they start and "E <ns>" when they end
 * to one file: no two overlap, and each starts right after the one before
 * it ends. */
TEST(dlock_runs_never_overlap_and_hand_on_at_once)
{
	enum { RUNS = 4 };
	const char *n = lockname("dlock-overlap");
	char file[400], script[1000], buf[4096], *line, *save = NULL;
	long long prev_end = 0, worst_gap = 0;
	struct proc p[RUNS];
	int starts = 0, ends = 0;
	bool inside = false;

	tmpfile_named(file, sizeof(file), "stamps");
	snprintf(script, sizeof(script),
		 "echo S $(date +%%s%%N) >> %s; sleep 0.3; echo E $(date +%%s%%N) >> %s", file,
		 file);
	for (int i = 0; i < RUNS; i++)
		dlock_start(&p[i], NULL, NULL, "overlap", "run", n, "--", "sh", "-c", script, NULL);
	for (int i = 0; i < RUNS; i++)
		CHECK(dlock_wait(&p[i]) == 0, "run %d exits 0: %s", i, dlock_err(&p[i]));
	file_read(file, buf, sizeof(buf));
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long long t = atoll(line + 2);

		if (line[0] == 'S') {
			CHECK(!inside, "a run started while another was inside:\n%s",
			      file_read(file, buf, sizeof(buf)));
			if (prev_end && (t - prev_end) / 1000000 > worst_gap)
				worst_gap = (t - prev_end) / 1000000;
			inside = true;
			starts++;
		} else {
			CHECK(inside, "an end without its start");
			inside = false;
			prev_end = t;
			ends++;
		}
	}
	CHECK(starts == RUNS && ends == RUNS, "%d starts and %d ends, want %d each", starts, ends,
	      RUNS);
	printf("# %d dlock runs one after another: the longest gap from an end to the next "
	       "start %lld ms\n", RUNS, worst_gap);
	/* a release wakes the waiter: a hand-off takes a process exit, a
	 * DELETE, a wake-up and a fork -- never a poll or a lease end (15 s) */
	CHECK(worst_gap < 400LL * slow_factor(), "the next run starts %lld ms after one ends",
	      worst_gap);
}

TEST(dlock_stops_the_command_when_the_lock_is_force_released)
{
	const char *n = lockname("dlock-forced"), *m = lockname("dlock-forced-quits");
	char termed[400], script[1000];
	struct proc p;
	int64_t t0, took;
	int code;

	/* a command that ignores SIGTERM (it notes it and goes on) */
	tmpfile_named(termed, sizeof(termed), "termed");
	snprintf(script, sizeof(script),
		 "trap 'echo TERM >> %s' TERM; echo ready >> %s; while :; do sleep 0.05; done",
		 termed, termed);
	dlock_start(&p, NULL, NULL, "forced", "run", "--ttl", "3s", "--grace", "1s", n, "--",
		    "sh", "-c", script, NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", n) == 1, 5000), "dlock takes it");
	/* its trap is set: the SIGTERM comes at once now (dlock watches) */
	CHECK(WAIT_FOR(file_contains(termed, "ready"), 5000), "the command runs");
	CHECK(status_of(NULL, "DELETE", "/locks/%s?force=true", n) == 200, "force release");
	t0 = mono_ms();
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	took = mono_ms() - t0;
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75, "the lease-lost code 75, got %d: %s", code, dlock_err(&p));
	CHECK(file_contains(termed, "TERM"), "the command got SIGTERM");
	CHECK(strstr(dlock_err(&p), "lost") && strstr(dlock_err(&p), n), "stderr says so: %s",
	      dlock_err(&p));
	/* seen at once (the watch: before it, at the next heartbeat, every
	 * third of the lease less the grace and the margin: 633 ms), killed a
	 * grace later */
	CHECK(took >= 1000 && took < 1000 + 1000 + 1500LL * slow_factor(),
	      "SIGKILL after the 1 s grace: dlock ended %lld ms after the forced release",
	      (long long)took);

	/* one that stops on SIGTERM is not waited for the grace */
	dlock_start(&p, NULL, NULL, "forced2", "run", "--ttl", "6s", "--grace", "3s", m, "--",
		    "sleep", "60", NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", m) == 1, 5000), "dlock takes it");
	CHECK(status_of(NULL, "DELETE", "/locks/%s?force=true", m) == 200, "force release");
	t0 = mono_ms();
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75 && mono_ms() - t0 < 1000 + 1500LL * slow_factor(),
	      "75 at once, not after the 3 s grace (%d after %lld ms)", code,
	      (long long)(mono_ms() - t0));

	/* a long lease: its next heartbeat is 9.4 s away, but dlock watches
	 * the lock and renews the moment it changes, so the forced release
	 * stops the command within a round trip (a probe: up to a third of
	 * the lease, then the grace, while another owner held it); a lock of
	 * each path, a read lock's state being the read-write lock's */
	for (int i = 0; i < 2 && !test_failed(); i++) {
		const char *kind = i ? "rwlock" : "lock", *path = i ? "/rwlocks/%s" : "/locks/%s";
		const char *o = lockname(i ? "dlock-forced-read" : "dlock-forced-long");

		if (i)
			dlock_start(&p, NULL, NULL, "forced3", "run", "--kind", kind, "--mode", "read",
				    "--ttl", "30s", "--grace", "1s", o, "--", "sleep", "60", NULL);
		else
			dlock_start(&p, NULL, NULL, "forced3", "run", "--ttl", "30s", "--grace", "1s",
				    o, "--", "sleep", "60", NULL);
		CHECK(WAIT_FOR(flag_of(NULL, "locked", path, o) == 1, 5000), "dlock takes %s", o);
		sleep_ms(300);	/* the watch is in place */
		CHECK(status_of(NULL, "DELETE", i ? "/rwlocks/%s/read?force=true" : "/locks/%s?force=true",
				o) == 200, "force release");
		t0 = mono_ms();
		CHECK(WAIT_FOR(proc_exited(&p), 20000), "dlock ends");
		took = mono_ms() - t0;
		code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
		printf("# %s, a 30 s lease, forced free: dlock ended %lld ms later (%d)\n", kind,
		       (long long)took, code);
		CHECK(code == 75 && took < 1000LL * slow_factor(),
		      "%s: 75 within a round trip of the forced release, not at the heartbeat 9.4 s "
		      "later (%d after %lld ms): %s", kind, code, (long long)took, dlock_err(&p));
	}
}

/* The watch asks for waits as long as dlockd takes: under a --max-wait-ms
 * of 100 it halves its wait_ms down to one dlockd takes (it stopped at
 * 117 ms and asked again every second, refused each time: a probe), and a
 * forced release still stops the command within a round trip. */
TEST(dlock_watches_under_a_short_max_wait)
{
	static const char *const flags[] = { "--max-wait-ms", "100", NULL };
	const char *n = lockname("dlock-shortwait");
	struct dlockd_srv d;
	struct proc p;
	int64_t t0, took;
	int code;

	CHECK(dlockd_start(&d, NULL, flags) == 0, "a dlockd with --max-wait-ms 100");
	dlock_start(&p, d.base, NULL, "shortwait", "run", "--ttl", "30s", "--grace", "1s", n, "--",
		    "sleep", "60", NULL);
	CHECK(WAIT_FOR(flag_of(&d, "locked", "/locks/%s", n) == 1, 5000), "dlock takes it");
	sleep_ms(2500);	/* ten halvings, a tenth of a second apart */
	CHECK(status_of(&d, "DELETE", "/locks/%s?force=true", n) == 200, "force release");
	t0 = mono_ms();
	CHECK(WAIT_FOR(proc_exited(&p), 20000), "dlock ends");
	took = mono_ms() - t0;
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75 && took < 1000LL * slow_factor(),
	      "75 within a round trip of the forced release, not at the heartbeat 9.4 s later "
	      "(%d after %lld ms): %s", code, (long long)took, dlock_err(&p));
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(dlock_stops_the_command_by_the_lease_end_when_dlockd_dies)
{
	const char *n = lockname("dlock-dlockd-dies");
	char pidfile[400], script[600];
	struct dlockd_srv d;
	struct proc p;
	long long pid;
	int64_t t0, took;
	int code;

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "a dlockd of this test's");
	tmpfile_named(pidfile, sizeof(pidfile), "pid");
	/* deaf to SIGTERM, with a child: only SIGKILL to the group ends it */
	snprintf(script, sizeof(script), "trap '' TERM; echo $$ > %s; sleep 60; sleep 60",
		 pidfile);
	dlock_start(&p, d.base, NULL, "dies", "run", "--ttl", "2s", "--grace", "1s", n, "--", "sh",
		    "-c", script, NULL);
	CHECK(WAIT_FOR((pid = number_in(pidfile)) > 0, 5000), "the command runs: %s", dlock_err(&p));
	dlockd_kill(&d);
	t0 = mono_ms();
	CHECK(WAIT_FOR(kill(-(pid_t)pid, 0) < 0 && errno == ESRCH, 10000),
	      "the command's group ends");
	took = mono_ms() - t0;
	/* the last renewal was sent before the kill, so the lease ends within
	 * 2 s of it: SIGKILL 70 ms (the margin) before that, reaped at once */
	CHECK(took < 2000 + 250LL * slow_factor(),
	      "stopped %lld ms after dlockd died: no later than the lease end", (long long)took);
	CHECK(took >= 1000 - 100, "but not before the lease could have been renewed (%lld ms)",
	      (long long)took);
	CHECK(WAIT_FOR(proc_exited(&p), 3000), "dlock ends soon after (one try to release)");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75, "the lease-lost code 75, got %d: %s", code, dlock_err(&p));
	CHECK(strstr(dlock_err(&p), "no renewal"), "stderr says why: %s", dlock_err(&p));
}

/* The wall clock (what `date +%s%N` writes), in ns, of the moment mono_ms()
 * read m: never later than that moment. */
static long long wall_ns_at(int64_t m)
{
	struct timespec real, mono;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return (long long)real.tv_sec * 1000000000LL + real.tv_nsec -
	       ((long long)mono.tv_sec * 1000000000LL + mono.tv_nsec) + (long long)m * 1000000LL;
}

static void dlockd_kill_at_end(void *d)
{
	dlockd_kill(d);
}

/* The promise of `dlock run`: the command never runs outside its lease.
 * dlockd stalls (SIGSTOP: renewals go unanswered) under a command deaf to
 * SIGTERM that writes "T <ns>" every 50 ms (and "TERM <ns>" on SIGTERM).
 * Another owner waits on the suite's dlockd and is granted the lock the
 * moment the lease ends in Redis: the command's last tick must come
 * before that grant, and its SIGTERM a grace before it. */
TEST(dlock_stops_the_command_inside_its_lease_when_dlockd_stalls)
{
	static struct dlockd_srv d;
	static char buf[65536];
	const char *n = lockname("dlock-inside");
	char ticks[400], script[1200], path[300], *line, *save = NULL;
	long long last_tick = 0, term = 0, grant;
	struct proc p;
	struct bg b;
	int code;

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "a dlockd of this test's, to stall");
	test_at_end(dlockd_kill_at_end, &d);
	tmpfile_named(ticks, sizeof(ticks), "ticks");
	snprintf(script, sizeof(script),
		 "trap 'echo TERM $(date +%%s%%N) >> %s' TERM; "
		 "while :; do echo T $(date +%%s%%N) >> %s; sleep 0.05; done", ticks, ticks);
	dlock_start(&p, d.base, NULL, "inside", "run", "--ttl", "3s", "--grace", "1s", n, "--",
		    "sh", "-c", script, NULL);
	CHECK(WAIT_FOR(file_contains(ticks, "T "), 5000), "the command ticks: %s", dlock_err(&p));
	CHECK(kill(d.pid, SIGSTOP) == 0, "stall dlockd (SIGSTOP)");
	/* the wait under test: the lease running out with nobody renewing it */
	snprintf(path, sizeof(path), "/locks/%s?owner=next&ttl_ms=30000&wait_ms=15000", n);
	bg_start(&b, "PUT", path, NULL);
	bg_join(&b);
	kill(d.pid, SIGCONT);	/* dlock's release goes to it */
	CHECK_STATUS(b.r, 200, "another owner is granted the lock once the lease ends");
	http_free(&b.r);
	grant = wall_ns_at(b.done_ms);
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75 && strstr(dlock_err(&p), "no renewal"),
	      "the lease-lost code 75, saying why (%d: %s)", code, dlock_err(&p));
	file_read(ticks, buf, sizeof(buf));
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "T ", 2) && atoll(line + 2) > last_tick)
			last_tick = atoll(line + 2);
		else if (!strncmp(line, "TERM ", 5) && !term)
			term = atoll(line + 5);
	}
	printf("# dlock --ttl 3s --grace 1s, dlockd stalled: the command's last tick %+lld ms "
	       "and its SIGTERM %+lld ms from another owner's grant\n",
	       (last_tick - grant) / 1000000, term ? (term - grant) / 1000000 : 0);
	CHECK(term > 0, "the command got SIGTERM");
	CHECK(last_tick < grant, "the command ran %lld ms past the lease: another owner had the "
	      "lock by then", (last_tick - grant) / 1000000);
	CHECK(term < grant - 1000LL * 1000000,
	      "SIGTERM %lld ms before the lease ended: less than the 1 s grace",
	      (grant - term) / 1000000);
	CHECK(lock_release(NULL, n, "next") == 200, "the other owner releases");
	CHECK(dlockd_stop(&d, 5000) == 0, "the stalled dlockd, continued, stops cleanly");
}

/* The lease's ttl_ms as the suite's dlockd answers for n, -1 if none. */
static long long lease_left(const char *n)
{
	struct http_resp r;
	char path[300];
	long long left = -1;

	snprintf(path, sizeof(path), "/locks/%s", n);
	if (http("GET", path, NULL, &r) == 0 && r.status == 200)
		left = json_int(&r, "ttl_ms");
	http_free(&r);
	return left;
}

/* Wait (5 s at most) for a renewal of n: its ttl_ms going up. */
static bool lease_renewed(const char *n)
{
	long long prev = lease_left(n), left;

	for (int64_t until = mono_ms() + 5000LL * slow_factor(); mono_ms() < until; prev = left) {
		sleep_ms(10);
		left = lease_left(n);
		if (prev > 0 && left > prev + 100)
			return true;
	}
	return false;
}

/* The stop inside the lease starts only when the lease can no longer be
 * saved. With --ttl 3s --grace 1s the lease leaves 1900 ms before the
 * stop; renewals go out every third of that (633 ms, each waiting as long
 * for its answer). dlockd stalled for 1.3 s right after a renewal: the
 * next one goes unanswered (lost), the retry after the stall is answered,
 * and the command runs on -- twice over. */
TEST(dlock_survives_a_lost_renewal)
{
	static struct dlockd_srv d;
	const char *n = lockname("dlock-one-lost");
	struct proc p;
	int code;

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "a dlockd of this test's, to stall");
	test_at_end(dlockd_kill_at_end, &d);
	dlock_start(&p, d.base, NULL, "one-lost", "run", "--ttl", "3s", "--grace", "1s", n, "--",
		    "sleep", "6", NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", n) == 1, 5000), "dlock takes it: %s",
	      dlock_err(&p));
	for (int i = 0; i < 2; i++) {
		CHECK(lease_renewed(n), "dlock renews the lease: %s", dlock_err(&p));
		/* the stall under test: past the next renewal's wait for an answer */
		CHECK(kill(d.pid, SIGSTOP) == 0, "stall dlockd (SIGSTOP)");
		sleep_ms(1300);
		CHECK(kill(d.pid, SIGCONT) == 0, "and let it go on");
		/* dlockd, continued, serves the unanswered renewal too (its
		 * client gone): a rise of ttl_ms that dlock never learns of */
		sleep_ms(1000);
	}
	CHECK((code = dlock_wait(&p)) == 0 && !strstr(dlock_err(&p), "stopping"),
	      "the command ran to its end (%d: %s)", code, dlock_err(&p));
	CHECK(dlockd_stop(&d, 5000) == 0, "dlockd stops cleanly");
}

TEST(dlock_forwards_sigterm_to_the_whole_group_and_releases)
{
	const char *n = lockname("dlock-sigterm");
	char pidfile[400], script[600];
	struct proc p;
	long long pid;
	int code;

	tmpfile_named(pidfile, sizeof(pidfile), "pid");
	snprintf(script, sizeof(script), "echo $$ > %s; sleep 60; echo not reached", pidfile);
	dlock_start(&p, NULL, NULL, "sigterm", "run", n, "--", "sh", "-c", script, NULL);
	CHECK(WAIT_FOR((pid = number_in(pidfile)) > 0, 5000), "the command runs: %s", dlock_err(&p));
	CHECK(kill(p.pid, SIGTERM) == 0, "SIGTERM to dlock");
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 128 + SIGTERM, "the shell died of SIGTERM: 143, got %d: %s", code,
	      dlock_err(&p));
	CHECK(kill(-(pid_t)pid, 0) < 0 && errno == ESRCH,
	      "its sleep got the SIGTERM too: the group is gone");
	CHECK(!strstr(dlock_out(&p), "not reached"), "the shell did not go on");
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "and the lock is released");
}

/* The fair lock's queue_length (0 when it has none), -1 without a 200. */
static long long queue_length(const char *n)
{
	struct http_resp r;
	char path[300];
	long long len = -1;

	snprintf(path, sizeof(path), "/fairlocks/%s", n);
	if (http("GET", path, NULL, &r) == 0 && r.status == 200)
		len = json_int(&r, "queue_length") > 0 ? json_int(&r, "queue_length") : 0;
	http_free(&r);
	return len;
}

TEST(dlock_sigint_while_waiting_leaves_no_queue_place)
{
	const char *n = lockname("dlock-queue");
	struct proc p;
	int code;

	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=holder", n) == 200, "holder");
	dlock_start(&p, NULL, NULL, "queue", "run", "--kind", "fairlock", n, "--", "true", NULL);
	CHECK(WAIT_FOR(queue_length(n) == 1, 5000), "dlock queues");
	CHECK(kill(p.pid, SIGINT) == 0, "SIGINT to dlock");
	CHECK(WAIT_FOR(proc_exited(&p), 5000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 128 + SIGINT, "130 for SIGINT, got %d: %s", code, dlock_err(&p));
	/* gone at once: well before the 5 s queue-ttl would drop it */
	CHECK(WAIT_FOR(queue_length(n) == 0, 1500), "no queue place left behind (%lld)",
	      queue_length(n));
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "release");
	CHECK(flag_of(NULL, "locked", "/fairlocks/%s", n) == 0, "nobody was granted it");
}

TEST(dlock_token_stays_off_every_command_line)
{
	static const char token[] = "dlock-test-token-5b1f0c9e27a44d83";
	char file[300], tokfile[300], env[128];
	const char *flags[] = { "--auth-file", file, NULL };
	const char *n = lockname("dlock-token");
	struct dlockd_srv d;
	struct proc p, q;
	FILE *f;
	int code;

	snprintf(file, sizeof(file), "%s/dlock-tokens", test_tmpdir());
	snprintf(tokfile, sizeof(tokfile), "%s/dlock-token", test_tmpdir());
	f = fopen(file, "w");
	CHECK(f, "write the auth file");
	fprintf(f, "%s client * dlock-test\n", token);
	fclose(f);
	f = fopen(tokfile, "w");
	CHECK(f, "write the token file");
	fprintf(f, "%s\n", token);
	fclose(f);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "dlockd with --auth-file");

	snprintf(env, sizeof(env), "DLOCK_TOKEN=%s", token);
	dlock_start(&p, d.base, env, "token-env", "run", n, "--", "sleep", "1", NULL);
	dlock_start(&q, d.base, NULL, "token-file", "run", "--token-file", tokfile,
		    lockname("dlock-token2"), "--", "sleep", "1", NULL);
	for (int i = 0; i < 20 && !proc_exited(&p); i++) {
		CHECK(!on_a_command_line(token), "the token is on a command line");
		sleep_ms(50);
	}
	CHECK((code = dlock_wait(&p)) == 0, "DLOCK_TOKEN: the run succeeds (%d: %s)", code,
	      dlock_err(&p));
	CHECK((code = dlock_wait(&q)) == 0, "--token-file: the run succeeds (%d: %s)", code,
	      dlock_err(&q));
	dlock_start(&p, d.base, NULL, "no-token", "run", "-n", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 77 && strstr(dlock_err(&p), "401"),
	      "no token: 77, saying 401 (%d: %s)", code, dlock_err(&p));
	dlockd_stop(&d, 5000);
}

/* The subcommands a script uses across its steps, from a shell as a
 * script would. */
TEST(dlock_acquire_renew_release_status_and_list_from_a_script)
{
	const char *n = lockname("dlock-steps");
	char script[2000], env[600];
	struct proc p;
	int code;

	snprintf(env, sizeof(env), "DLOCK=%s", dlock_binary());
	snprintf(script, sizeof(script),
		 "set -e\n"
		 "eval \"$($DLOCK acquire --ttl 20s %s)\"\n"
		 "echo token=$DLOCK_FENCING_TOKEN owner=$DLOCK_OWNER\n"
		 "$DLOCK status %s >/dev/null\n"
		 "$DLOCK list %s\n"
		 "if $DLOCK run -n %s -- true 2>/dev/null; then exit 10; fi\n"
		 "$DLOCK renew\n"
		 "[ \"$($DLOCK status %s | sed 's/.*\"ttl_ms\":\\([0-9]*\\).*/\\1/')\" -gt 15000 ]\n"
		 "$DLOCK release\n"
		 "if $DLOCK status %s >/dev/null; then exit 11; fi\n"
		 "if $DLOCK release; then exit 12; else echo second release $?; fi\n"
		 "$DLOCK run --ttl 20s %s -- sh -c '$DLOCK renew && "
		 "[ \"$DLOCK_TTL_MS\" = 20000 ] && $DLOCK status %s' | grep -q '\"ttl_ms\":1[6-9]'\n"
		 "$DLOCK acquire --ttl 20s %s >/dev/null\n"
		 "$DLOCK release --force %s\n"
		 "if $DLOCK release --force %s; then exit 13; else echo second force $?; fi\n",
		 n, n, n, n, n, n, n, n, n, n, n);
	{
		const char *argv[] = { "sh", "-c", script, NULL };
		char server[128];
		const char *envv[] = { server, env, NULL };

		snprintf(server, sizeof(server), "DLOCK_SERVER=%s", H_dlockd.base);
		proc_start(&p, argv, envv, "steps");
	}
	CHECK((code = dlock_wait(&p)) == 0, "the script runs through (%d): %s %s", code,
	      dlock_out(&p), dlock_err(&p));
	CHECK(strstr(dlock_out(&p), "token=1") && strstr(dlock_out(&p), n) &&
	      strstr(dlock_out(&p), "second release 75"),
	      "acquire's assignments, list's line, release's 75 when not held: %s", dlock_out(&p));
	/* a forced release of a free lock is "not held" too (it said 0) */
	CHECK(strstr(dlock_out(&p), "second force 75") && strstr(dlock_err(&p), "nobody held it"),
	      "release --force of a free lock: 75: %s %s", dlock_out(&p), dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "released");
}

/* The lease dlock counts on after a long poll starts when it was granted,
 * not when it was asked for: a wait longer than --ttl still runs the
 * command (dlock renews at once to know when its lease began). */
TEST(dlock_runs_the_command_after_a_wait_longer_than_its_lease)
{
	const char *n = lockname("dlock-long-wait"), *m = lockname("dlock-long-wait-acq");
	struct proc p;
	int code;

	CHECK(lock_hold(NULL, n, "other", 60000), "another owner holds it");
	dlock_start(&p, NULL, NULL, "long", "run", "--ttl", "1s", n, "--", "echo", "ran", NULL);
	CHECK(wait_waiters(NULL, 1, 5000), "dlock waits");
	sleep_ms(1500);		/* the wait under test: longer than dlock's 1 s lease */
	CHECK(lock_release(NULL, n, "other") == 200, "release");
	CHECK((code = dlock_wait(&p)) == 0 && strstr(dlock_out(&p), "ran"),
	      "the command runs with the lease just granted (%d: %s %s)", code, dlock_out(&p),
	      dlock_err(&p));

	CHECK(lock_hold(NULL, m, "other", 1500), "another owner holds it for 1.5 s");
	dlock_start(&p, NULL, NULL, "long-acq", "acquire", "--ttl", "1s", m, NULL);
	CHECK((code = dlock_wait(&p)) == 0 && strstr(dlock_out(&p), "DLOCK_TTL_MS='1000'"),
	      "acquire after the holder's lease ran out: the lease it asked for (%d: %s %s)",
	      code, dlock_out(&p), dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", m) == 1, "and it holds the lock");
}

/* Ctrl-Z stops the command with dlock; if the lease ends meanwhile, the
 * command never runs again and another holder is alone. */
TEST(dlock_ctrl_z_stops_the_command_with_it)
{
	const char *n = lockname("dlock-ctrl-z");
	char tick[400], script[1400], state[64], path[64];
	struct proc p, q;
	long long t1;
	int code;

	tmpfile_named(tick, sizeof(tick), "tick");
	/* deaf to SIGTERM: only SIGKILL ends it, which must come at once on
	 * fg, the lease's end plus the grace being past by then */
	snprintf(script, sizeof(script),
		 "trap '' TERM; while :; do date +%%s%%N > %s.new; mv %s.new %s; sleep 0.05; done",
		 tick, tick, tick);
	dlock_start(&p, NULL, NULL, "ctrlz", "run", "--ttl", "2s", "--grace", "300ms", n, "--",
		    "sh", "-c", script, NULL);
	CHECK(WAIT_FOR(number_in(tick) > 0, 5000), "the command ticks: %s", dlock_err(&p));
	CHECK(kill(p.pid, SIGTSTP) == 0, "Ctrl-Z (SIGTSTP) to dlock");
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p.pid);
	CHECK(WAIT_FOR(strstr(file_read(path, state, sizeof(state)), ") T "), 5000),
	      "dlock stops: %s", state);
	sleep_ms(200);		/* a tick already under way lands */
	t1 = number_in(tick);
	sleep_ms(2500);		/* the stop under test: past dlock's 2 s lease */
	CHECK(number_in(tick) == t1, "the command stopped with dlock");
	dlock_start(&q, NULL, NULL, "ctrlz2", "run", "-n", n, "--", "echo", "second", NULL);
	CHECK((code = dlock_wait(&q)) == 0, "the lease ran out: another run gets the lock (%d: %s)",
	      code, dlock_err(&q));
	CHECK(kill(p.pid, SIGCONT) == 0, "fg (SIGCONT)");
	CHECK(WAIT_FOR(proc_exited(&p), 5000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75 && strstr(dlock_err(&p), "stopped"), "lease lost while stopped: 75 (%d: %s)",
	      code, dlock_err(&p));
	CHECK(number_in(tick) == t1, "and the command never ran again");
}

/* What dlock's caller leaves it with: a pipe that closes (SIGPIPE), SIGCHLD
 * ignored, a child of its own (exec dlock after `cmd &`). */
TEST(dlock_survives_closed_pipes_ignored_sigchld_and_inherited_children)
{
	const char *n = lockname("dlock-pipe"), *m = lockname("dlock-sigign");
	const char *k = lockname("dlock-inherit");
	char pidfile[400], script[1200], env[600];
	struct proc p;
	long long pid;
	int code;

	snprintf(env, sizeof(env), "DLOCK=%s", dlock_binary());
	tmpfile_named(pidfile, sizeof(pidfile), "pid");
	/* stdout and stderr into a pipe whose reader is gone: the command gets
	 * SIGPIPE as it would without dlock; dlock's own messages fail quietly,
	 * and it still stops the leftover sleep and releases */
	snprintf(script, sizeof(script),
		 "$DLOCK run --grace 1s %s -- sh -c 'echo $$ > %s; sleep 60 & echo a; sleep 0.3; "
		 "echo b; echo c' 2>&1 | head -c 1 >/dev/null; sleep 0.3", n, pidfile);
	{
		const char *argv[] = { "sh", "-c", script, NULL };
		char server[128];
		const char *envv[] = { server, env, NULL };

		snprintf(server, sizeof(server), "DLOCK_SERVER=%s", H_dlockd.base);
		proc_start(&p, argv, envv, "pipe");
	}
	CHECK(dlock_wait(&p) >= 0, "the pipeline ends");
	CHECK((pid = number_in(pidfile)) > 0, "the command ran");
	CHECK(WAIT_FOR(kill(-(pid_t)pid, 0) < 0 && errno == ESRCH, 5000),
	      "the leftover sleep is stopped");
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", n) == 0, 5000), "the lock is released");

	/* started with SIGCHLD ignored */
	{
		const char *argv[] = { "python3", "-c",
				       "import os, signal, sys; signal.signal(signal.SIGCHLD, "
				       "signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])",
				       dlock_binary(), "run", m, "--", "sh", "-c", "exit 3", NULL };
		char server[128];
		const char *envv[] = { server, NULL };

		snprintf(server, sizeof(server), "DLOCK_SERVER=%s", H_dlockd.base);
		proc_start(&p, argv, envv, "sigign");
	}
	CHECK((code = dlock_wait(&p)) == 3, "SIGCHLD ignored by the caller: the status comes "
	      "through (%d: %s)", code, dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", m) == 0, "and the lock is released");

	/* a child of dlock's own (it was exec'd by a shell with a job) ends
	 * while dlock waits: the wait goes on */
	CHECK(lock_hold(NULL, k, "other", 1500), "another owner holds it for 1.5 s");
	snprintf(script, sizeof(script), "sleep 0.2 & exec $DLOCK run %s -- echo ran", k);
	{
		const char *argv[] = { "sh", "-c", script, NULL };
		char server[128];
		const char *envv[] = { server, env, NULL };

		snprintf(server, sizeof(server), "DLOCK_SERVER=%s", H_dlockd.base);
		proc_start(&p, argv, envv, "inherit");
	}
	CHECK((code = dlock_wait(&p)) == 0 && strstr(dlock_out(&p), "ran"),
	      "an inherited child's exit does not end the wait (%d: %s)", code, dlock_err(&p));
}

TEST(dlock_refuses_a_second_run_with_the_same_owner)
{
	const char *n = lockname("dlock-same-owner");
	struct http_resp r;
	struct proc p, q;
	char path[300];
	int code;

	dlock_start(&p, NULL, NULL, "owner1", "run", "--owner", "cron-host1", n, "--", "sleep", "3",
		    NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", n) == 1, 5000), "the first runs");
	dlock_start(&q, NULL, NULL, "owner2", "run", "-n", "--owner", "cron-host1", n, "--",
		    "echo", "second", NULL);
	CHECK((code = dlock_wait(&q)) == 1 && !strstr(dlock_out(&q), "second") &&
	      strstr(dlock_err(&q), "unique"),
	      "the second is refused as a conflict, saying why (%d: %s)", code, dlock_err(&q));
	snprintf(path, sizeof(path), "/locks/%s?owner=cron-host1", n);
	CHECK(http("GET", path, NULL, &r) == 0 && json_int(&r, "holds") == 1,
	      "the first still holds it, once: %s", r.body);
	http_free(&r);
	CHECK((code = dlock_wait(&p)) == 0, "the first ends well (%d: %s)", code, dlock_err(&p));
}

/* The command gets the descriptors dlock got, not dlock's sockets; a closed
 * stdin is /dev/null. */
TEST(dlock_command_inherits_no_socket_of_dlocks)
{
	const char *n = lockname("dlock-fds"), *m = lockname("dlock-full");
	struct proc p;
	int code;

	{
		const char *argv[] = { "python3", "-c",
				       "import os, sys; os.closerange(3, 65536); os.close(0); "
				       "os.execv(sys.argv[1], sys.argv[1:])",
				       /* the command lists its own descriptors after
				        * listdir's own is closed (a shell listing its
				        * fds may catch its pipeline's pipe open) */
				       dlock_binary(), "run", n, "--", "python3", "-c",
				       "import os\n"
				       "for f in sorted(os.listdir('/proc/self/fd'), key=int):\n"
				       "    try: print(f, os.readlink('/proc/self/fd/' + f))\n"
				       "    except OSError: pass\n",
				       NULL };
		char server[128];
		const char *envv[] = { server, NULL };

		snprintf(server, sizeof(server), "DLOCK_SERVER=%s", H_dlockd.base);
		proc_start(&p, argv, envv, "fds");
	}
	CHECK((code = dlock_wait(&p)) == 0, "runs (%d: %s)", code, dlock_err(&p));
	CHECK(strstr(dlock_out(&p), "0 /dev/null") && !strstr(dlock_out(&p), "socket:") &&
	      !strstr(dlock_out(&p), "\n3 "),
	      "0 1 2 only, 0 on /dev/null, no socket:\n%s", dlock_out(&p));

	{
		const char *argv[] = { "sh", "-c", "exec \"$DLOCK\" acquire \"$N\" >/dev/full", NULL };
		char server[128], env[600], name[300];
		const char *envv[] = { server, env, name, NULL };

		snprintf(server, sizeof(server), "DLOCK_SERVER=%s", H_dlockd.base);
		snprintf(env, sizeof(env), "DLOCK=%s", dlock_binary());
		snprintf(name, sizeof(name), "N=%s", m);
		proc_start(&p, argv, envv, "full");
	}
	CHECK((code = dlock_wait(&p)) == 74 && strstr(dlock_err(&p), "stdout"),
	      "acquire that cannot print its assignments: 74 (%d: %s)", code, dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", m) == 0, "and it gave the lock back");
}

/* The shared service behind HTTPS with client certificates: dlock trusts a
 * private CA (--cacert) and presents its certificate (--cert, --key). */
TEST(dlock_runs_against_an_https_dlockd_with_client_certificates)
{
	const char *n = lockname("dlock-mtls");
	struct dlockd_srv d;
	struct proc p;
	int code;

	CHECK(dlockd_start_mtls(&d, "server1") == 0, "dlockd with --tls-client-ca (in %s)",
	      test_tmpdir());

	dlock_start(&p, d.base, NULL, "mtls", "run", "--cacert", pki_path("ca.pem"), "--cert",
		    pki_path("client.pem"), "--key", pki_path("client.key"), n, "--", "sh", "-c",
		    "echo token $DLOCK_FENCING_TOKEN", NULL);
	CHECK((code = dlock_wait(&p)) == 0 && strstr(dlock_out(&p), "token 1"),
	      "a run over mutual TLS (%d: %s %s)", code, dlock_out(&p), dlock_err(&p));
	dlock_start(&p, d.base, NULL, "mtls-nocert", "run", "-n", "--cacert",
		    pki_path("ca.pem"), n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 69 && strstr(dlock_err(&p), "cannot reach dlockd"),
	      "without a client certificate: no service, 69 (%d: %s)", code, dlock_err(&p));
	dlock_start(&p, d.base, NULL, "mtls-noca", "run", "-n", "--cert", pki_path("client.pem"),
		    "--key", pki_path("client.key"), n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 69 && strstr(dlock_err(&p), "certificate"),
	      "a server certificate of a CA not trusted: refused, saying so (%d: %s)", code,
	      dlock_err(&p));
	dlockd_stop(&d, 5000);
}

/* Start dlock with DLOCK_SERVER unset (empty) and the variables of envv
 * (NULL-terminated "NAME=value"s, at most 6) in its environment. */
static void dlock_start_env(struct proc *p, const char *const *envv, const char *tag, ...)
{
	const char *env[8] = { "DLOCK_SERVER=" };
	int n = 1;
	va_list ap;

	for (int i = 0; envv && envv[i] && n < 7; i++)
		env[n++] = envv[i];
	env[n] = NULL;
	va_start(ap, tag);
	dlock_start_va(p, env, tag, ap);
	va_end(ap);
}

/* One name per setting: DLOCKD_URL (as the examples and manifests read
 * it), DLOCKD_TOKEN (the value) and DLOCKD_TOKEN_FILE (a path); the old
 * DLOCK_SERVER and DLOCK_TOKEN stay as aliases; --server wins over both.
 * A 401 says how to give a token. */
TEST(dlock_reads_dlockd_url_and_dlockd_token)
{
	static const char token[] = "dlock-url-token-0c2e8b7d14f9";
	char url[128], bad_url[128], tok[128], tokfile[300], tokfile_env[320], alias[128];
	const char *n = lockname("dlock-names");
	struct dlockd_srv d;
	struct proc p;
	FILE *f;
	int code;

	snprintf(tokfile, sizeof(tokfile), "%s/dlock-names-token", test_tmpdir());
	f = fopen(tokfile, "w");
	CHECK(f, "write the token file");
	fprintf(f, "%s\n", token);
	fclose(f);
	CHECK(dlockd_start_auth(&d, "dlock-names-auth", "dlock-url-token-0c2e8b7d14f9 client * names\n")
	      == 0, "dlockd with --auth-file");
	snprintf(url, sizeof(url), "DLOCKD_URL=%s", d.base);
	snprintf(tok, sizeof(tok), "DLOCKD_TOKEN=%s", token);
	snprintf(tokfile_env, sizeof(tokfile_env), "DLOCKD_TOKEN_FILE=%s", tokfile);
	snprintf(alias, sizeof(alias), "DLOCK_TOKEN=%s", token);

	dlock_start_env(&p, (const char *[]){ url, tok, NULL }, "url-token", "run", "-n", n, "--",
			"true", NULL);
	CHECK((code = dlock_wait(&p)) == 0, "DLOCKD_URL and DLOCKD_TOKEN: 0 (%d: %s)", code,
	      dlock_err(&p));
	dlock_start_env(&p, (const char *[]){ url, tokfile_env, NULL }, "url-tokfile", "run", "-n",
			n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 0, "DLOCKD_TOKEN_FILE: 0 (%d: %s)", code, dlock_err(&p));
	dlock_start_env(&p, (const char *[]){ url, alias, NULL }, "url-alias", "run", "-n", n, "--",
			"true", NULL);
	CHECK((code = dlock_wait(&p)) == 0, "DLOCK_TOKEN still works: 0 (%d: %s)", code,
	      dlock_err(&p));
	/* --server wins over DLOCKD_URL */
	snprintf(bad_url, sizeof(bad_url), "DLOCKD_URL=http://127.0.0.1:%d", free_port());
	dlock_start_env(&p, (const char *[]){ bad_url, tok, NULL }, "server-wins", "run", "-n",
			"--server", d.base, n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 0, "--server over DLOCKD_URL: 0 (%d: %s)", code,
	      dlock_err(&p));
	/* no token: 77, and how to give one */
	dlock_start_env(&p, (const char *[]){ url, NULL }, "no-token", "run", "-n", n, "--", "true",
			NULL);
	CHECK((code = dlock_wait(&p)) == 77 && strstr(dlock_err(&p), "401") &&
	      strstr(dlock_err(&p), "--token-file") && strstr(dlock_err(&p), "DLOCKD_TOKEN"),
	      "no token: 77 naming --token-file and DLOCKD_TOKEN (%d: %s)", code, dlock_err(&p));
	dlockd_stop(&d, 5000);

	/* the suite's dlockd, by DLOCK_SERVER, the alias */
	snprintf(alias, sizeof(alias), "DLOCK_SERVER=%s", H_dlockd.base);
	dlock_start_env(&p, (const char *[]){ alias, NULL }, "alias", "status", n, NULL);
	CHECK((code = dlock_wait(&p)) == 1, "DLOCK_SERVER still works: 1, not locked (%d: %s)",
	      code, dlock_err(&p));
	/* the help names the variables, and not DLOCK_TOKEN as a file */
	dlock_start(&p, NULL, NULL, "help", "--help", NULL);
	CHECK(dlock_wait(&p) == 0 && strstr(dlock_out(&p), "DLOCKD_URL") &&
	      strstr(dlock_out(&p), "DLOCKD_TOKEN_FILE") && !strstr(dlock_out(&p), "(default\n"
		"                         $DLOCK_TOKEN"),
	      "--help names DLOCKD_URL, DLOCKD_TOKEN_FILE: %s", dlock_out(&p));
}

/* flock's habits where they do not clash: --nonblock, --timeout, -c CMD
 * (through sh -c, before or after NAME), -v; options before the
 * subcommand; a --server that is no URL (flock's -s is --shared) is
 * refused; a command with spaces that is not found gets the sh -c hint. */
TEST(dlock_takes_flock_habits)
{
	const char *n = lockname("dlock-flock");
	char down[64];
	struct proc p;
	int64_t t0;
	int code;

	CHECK(lock_hold(NULL, n, "other", 30000), "another owner holds it");
	dlock_start(&p, NULL, NULL, "nonblock", "run", "--nonblock", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 1 && strstr(dlock_err(&p), "held by another owner"),
	      "--nonblock on a held lock: 1 (%d: %s)", code, dlock_err(&p));
	t0 = mono_ms();
	dlock_start(&p, NULL, NULL, "timeout", "run", "--timeout", "0.7", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 1 && mono_ms() - t0 >= 650,
	      "--timeout 0.7: 1 after the wait (%d after %lld ms: %s)", code,
	      (long long)(mono_ms() - t0), dlock_err(&p));
	CHECK(lock_release(NULL, n, "other") == 200, "release");

	dlock_start(&p, NULL, NULL, "c-after", "run", n, "-c", "echo a && echo \"$DLOCK_NAME\"",
		    NULL);
	CHECK((code = dlock_wait(&p)) == 0 && strstr(dlock_out(&p), "a\n") &&
	      strstr(dlock_out(&p), n), "run NAME -c CMD runs CMD with sh -c (%d: %s %s)", code,
	      dlock_out(&p), dlock_err(&p));
	dlock_start(&p, NULL, NULL, "c-before", "run", "-c", "exit 3", n, NULL);
	CHECK((code = dlock_wait(&p)) == 3, "run -c CMD NAME: its status (%d: %s)", code,
	      dlock_err(&p));
	dlock_start(&p, NULL, NULL, "c-and-cmd", "run", "-c", "true", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 64, "-c and a COMMAND: 64 (%d: %s)", code, dlock_err(&p));
	dlock_start(&p, NULL, NULL, "verbose", "run", "-v", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 0 && strstr(dlock_err(&p), "acquired") &&
	      strstr(dlock_err(&p), "fencing token") && strstr(dlock_err(&p), "released"),
	      "-v says when it got the lock and let it go (%d: %s)", code, dlock_err(&p));

	/* global options before the subcommand */
	dlock_start_env(&p, NULL, "global", "-s", H_dlockd.base, "--ttl", "5s", "run", "-n", n,
			"--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 0, "dlock -s URL --ttl 5s run ...: 0 (%d: %s)", code,
	      dlock_err(&p));
	dlock_start(&p, NULL, NULL, "global-v", "-V", NULL);
	CHECK(dlock_wait(&p) == 0 && !strncmp(dlock_out(&p), "dlock ", 6), "dlock -V: %s",
	      dlock_out(&p));

	/* flock -s NAME: here the name would be taken for a URL */
	dlock_start(&p, NULL, NULL, "s-name", "run", "-s", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 64 && strstr(dlock_err(&p), "--server") &&
	      strstr(dlock_err(&p), "http://"),
	      "run -s NAME: 64, --server must be an http(s) URL (%d: %s)", code, dlock_err(&p));
	snprintf(down, sizeof(down), "DLOCKD_URL=%s", n);
	dlock_start_env(&p, (const char *[]){ down, NULL }, "url-name", "status", n, NULL);
	CHECK((code = dlock_wait(&p)) == 64 && strstr(dlock_err(&p), "DLOCKD_URL"),
	      "DLOCKD_URL that is no URL: 64 naming it (%d: %s)", code, dlock_err(&p));

	/* a shell command given as one word */
	dlock_start(&p, NULL, NULL, "spaces", "run", n, "echo a && echo b", NULL);
	CHECK((code = dlock_wait(&p)) == 127 && strstr(dlock_err(&p), "-- sh -c '"),
	      "a command with spaces not found: 127 and the sh -c hint (%d: %s)", code,
	      dlock_err(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "nothing is held");
}

/* Nothing listening: dlock says where it tried, how to point it
 * elsewhere, and that it is retrying, before it gives up. */
TEST(dlock_unreachable_says_where_and_that_it_retries)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), code;
	char down[64];
	struct proc p;

	/* a port bound and never listened on refuses every connection, and
	 * no other process can take it during dlock's 10 s of retries (a free
	 * port could be, by a test running beside this one) */
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	      getsockname(fd, (struct sockaddr *)&a, &alen) == 0, "a port bound, not listening");
	snprintf(down, sizeof(down), "http://127.0.0.1:%d", ntohs(a.sin_port));
	dlock_start(&p, down, NULL, "down", "run", lockname("dlock-down"), "--", "true", NULL);
	CHECK(WAIT_FOR(strstr(dlock_err(&p), "retrying"), 5000),
	      "within 5 s it says it is retrying: %s", dlock_err(&p));
	CHECK(strstr(dlock_err(&p), down) && strstr(dlock_err(&p), "DLOCKD_URL") &&
	      strstr(dlock_err(&p), "--server"), "where it tried and how to set it: %s", dlock_err(&p));
	CHECK((code = dlock_wait(&p)) == 69, "then 69 (%d: %s)", code, dlock_err(&p));
	close(fd);
}

/* `dlock list` prints a table (name, kind, holders, lease left, waiting:
 * a fair lock's queue read from its status), -o name the names and -o json
 * (or --json) the listing's entries, one a line; -o is the owner
 * elsewhere, and an unknown format is a usage error. */
TEST(dlock_list_table_and_output_formats)
{
	const char *plain = lockname("dlist-plain"), *fair = lockname("dlist-fair");
	char prefix[128], path[300];
	struct proc p;
	struct bg b;
	int code;

	/* lockname gives "t<pid>-<test>-<hint>-<n>": up to "dlist-" lists both */
	snprintf(prefix, sizeof(prefix), "%.*s", (int)(strstr(plain, "dlist-") - plain + 6), plain);
	snprintf(path, sizeof(path), "/locks/%s?owner=worker-1&ttl_ms=60000&reentrant=true", plain);
	CHECK(status_of(NULL, "PUT", "%s", path) == 200, "first hold");
	CHECK(status_of(NULL, "PUT", "%s", path) == 200, "second hold");
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=holder-1&ttl_ms=600000", fair) == 200,
	      "fair lock held");
	snprintf(path, sizeof(path), "/fairlocks/%s?owner=waiter-1&wait_ms=20000", fair);
	bg_start(&b, "PUT", path, NULL);
	CHECK(wait_waiters(NULL, 1, 10000), "the waiter queued");

	dlock_start(&p, NULL, NULL, "list-table", "list", prefix, NULL);
	CHECK((code = dlock_wait(&p)) == 0, "list exits 0 (%d): %s", code, dlock_err(&p));
	CHECK(!strncmp(dlock_out(&p), "NAME ", 5) && strstr(dlock_out(&p), "KIND") &&
	      strstr(dlock_out(&p), "HOLDERS") && strstr(dlock_out(&p), "LEASE") &&
	      strstr(dlock_out(&p), "WAITING"), "a header line: %s", dlock_out(&p));
	CHECK(strstr(dlock_out(&p), plain) && strstr(dlock_out(&p), "worker-1 x2"),
	      "the plain lock's row with its holder and holds: %s", dlock_out(&p));
	{
		const char *row = strstr(dlock_out(&p), fair), *eol = row ? strchr(row, '\n') : NULL;

		CHECK(row && eol && strstr(row, "holder-1") && eol[-1] == '1' && eol[-2] == ' ',
		      "the fair lock's row ends with 1 waiting: %s", dlock_out(&p));
		CHECK(strstr(row, "s ") || strstr(row, "m"), "a lease left: %s", row);
	}

	dlock_start(&p, NULL, NULL, "list-name", "list", "-o", "name", prefix, NULL);
	CHECK(dlock_wait(&p) == 0 && strstr(dlock_out(&p), plain) && strstr(dlock_out(&p), fair) &&
	      !strstr(dlock_out(&p), "NAME") && !strchr(dlock_out(&p), ' '),
	      "-o name: the names, one a line: %s", dlock_out(&p));
	dlock_start(&p, NULL, NULL, "list-json", "list", "-o", "json", prefix, NULL);
	CHECK(dlock_wait(&p) == 0 && strstr(dlock_out(&p), "{\"name\":\"") &&
	      strstr(dlock_out(&p), "\"kind\":\"lock\"") && strstr(dlock_out(&p), "\"owner\":\"worker-1\""),
	      "-o json: the entries: %s", dlock_out(&p));
	dlock_start(&p, NULL, NULL, "list-json2", "list", "--json", prefix, NULL);
	CHECK(dlock_wait(&p) == 0 && strstr(dlock_out(&p), "{\"name\":\""), "--json as before: %s",
	      dlock_out(&p));
	dlock_start(&p, NULL, NULL, "list-bad", "list", "--output", "yaml", NULL);
	CHECK(dlock_wait(&p) == 64 && strstr(dlock_err(&p), "table, json, name"),
	      "an unknown format: 64 and why: %s", dlock_err(&p));
	dlock_start(&p, NULL, NULL, "status-output", "status", "--output", "json", plain, NULL);
	CHECK(dlock_wait(&p) == 64 && strstr(dlock_err(&p), "list's option"),
	      "--output on another command: 64: %s", dlock_err(&p));

	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=holder-1", fair) == 200,
	      "fair released");
	bg_join(&b);
	CHECK_STATUS(b.r, 200, "the waiter got it");
	http_free(&b.r);
	CHECK(status_of(NULL, "DELETE", "/fairlocks/%s?owner=waiter-1", fair) == 200,
	      "waiter released");
	snprintf(path, sizeof(path), "/locks/%s?force=true", plain);
	CHECK(status_of(NULL, "DELETE", "%s", path) == 200, "plain released");
}
