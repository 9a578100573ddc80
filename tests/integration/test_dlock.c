/* test_dlock.c -- the dlock CLI (cli/) against the suite's dlockd: `dlock
 * run` passes the command's status through, never lets two runs overlap,
 * hands the lock on at once, stops the command when the lease is lost
 * (a forced release, a dead dlockd) within the lease and the grace,
 * forwards signals to the command's whole group, gives back a queue place
 * when interrupted, and keeps the token off every command line; and the
 * subcommands a script uses across steps (acquire, renew, release,
 * status, list). */
#include "../harness/harness.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The dlock built beside the dlockd under test. */
static const char *dlock_bin(void)
{
	static char path[512];
	const char *d = dlockd_binary();
	size_t len = strlen(d);

	snprintf(path, sizeof(path), "%.*sdlock", (int)(len >= 6 ? len - 6 : 0), d);
	return path;
}

/* Start dlock ARGS... (NULL-terminated) against base (NULL: the suite's
 * dlockd) with env (one more "NAME=value", or NULL) in its environment. */
static void dlock_start(struct proc *p, const char *base, const char *env, const char *tag, ...)
{
	const char *argv[32];
	char server[128];
	const char *envv[] = { server, env, NULL };
	int argc = 0;
	va_list ap;

	snprintf(server, sizeof(server), "DLOCK_SERVER=%s", base ? base : H_dlockd.base);
	argv[argc++] = dlock_bin();
	va_start(ap, tag);
	while (argc < 31 && (argv[argc] = va_arg(ap, const char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	proc_start(p, argv, envv, tag);
}

/* Run dlock to the end (30 s at most); its exit code, or -1. */
static int dlock_wait(struct proc *p)
{
	if (!WAIT_FOR(proc_exited(p), 30000))
		proc_kill(p);
	return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

static const char *err_of(struct proc *p)
{
	static char buf[4096];

	return file_read(p->err, buf, sizeof(buf));
}

static const char *out_of(struct proc *p)
{
	static char buf[4096];

	return file_read(p->out, buf, sizeof(buf));
}

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
	CHECK((code = dlock_wait(&p)) == 7, "the command's exit status: %d; %s", code, err_of(&p));
	dlock_start(&p, NULL, NULL, "term", "run", n, "--", "sh", "-c", "kill -TERM $$", NULL);
	CHECK((code = dlock_wait(&p)) == 128 + SIGTERM, "killed by SIGTERM: 143, got %d; %s", code,
	      err_of(&p));
	dlock_start(&p, NULL, NULL, "env", "run", "--kind", "lock", n, "--", "sh", "-c",
		    "echo \"$DLOCK_NAME $DLOCK_KIND $DLOCK_FENCING_TOKEN $DLOCK_OWNER\"", NULL);
	CHECK(dlock_wait(&p) == 0, "a command that succeeds: 0; %s", err_of(&p));
	{
		char name[200] = "", kind[16] = "", owner[200] = "";
		long long token = 0;

		CHECK(sscanf(out_of(&p), "%199s %15s %lld %199s", name, kind, &token, owner) == 4 &&
		      !strcmp(name, n) && !strcmp(kind, "lock") && token > 0 && owner[0],
		      "DLOCK_NAME, DLOCK_KIND, DLOCK_FENCING_TOKEN, DLOCK_OWNER: '%s'", out_of(&p));
	}
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "released after each run");

	dlock_start(&p, NULL, NULL, "nocmd", "run", n, "--", "no-such-command-dlock", NULL);
	CHECK((code = dlock_wait(&p)) == 127 && strstr(err_of(&p), n) &&
	      strstr(err_of(&p), "no-such-command-dlock"),
	      "a command that is not there: 127 and a message naming lock and command (%d: %s)",
	      code, err_of(&p));
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
	CHECK((code = dlock_wait(&p)) == 1 && strstr(err_of(&p), n) &&
	      strstr(err_of(&p), "held by another owner"),
	      "-n on a held lock: 1, saying so (%d: %s)", code, err_of(&p));
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
	CHECK((code = dlock_wait(&p)) == 64 && strstr(err_of(&p), "--ttl 'soon'"),
	      "a bad duration: 64 naming it (%d: %s)", code, err_of(&p));
	dlock_start(&p, NULL, NULL, "usage3", "run", "bad/name", "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 64, "a bad name: 64, got %d", code);
	dlock_start(&p, NULL, NULL, "usage4", "frobnicate", NULL);
	CHECK((code = dlock_wait(&p)) == 64, "an unknown command: 64, got %d", code);
	dlock_start(&p, NULL, NULL, "usage5", "run", n, NULL);
	CHECK((code = dlock_wait(&p)) == 64, "no COMMAND: 64, got %d", code);

	snprintf(down, sizeof(down), "http://127.0.0.1:%d", free_port());
	dlock_start(&p, down, NULL, "down", "run", "-n", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 69 && strstr(err_of(&p), "cannot reach dlockd"),
	      "nothing listening: 69 and why (%d: %s)", code, err_of(&p));
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
		CHECK(dlock_wait(&p[i]) == 0, "run %d exits 0: %s", i, err_of(&p[i]));
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
	char termed[400], script[600];
	struct proc p;
	int64_t t0, took;
	int code;

	/* a command that ignores SIGTERM (it notes it and goes on) */
	tmpfile_named(termed, sizeof(termed), "termed");
	snprintf(script, sizeof(script),
		 "trap 'echo TERM >> %s' TERM; while :; do sleep 0.05; done", termed);
	dlock_start(&p, NULL, NULL, "forced", "run", "--ttl", "3s", "--grace", "1s", n, "--",
		    "sh", "-c", script, NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", n) == 1, 5000), "dlock takes it");
	CHECK(status_of(NULL, "DELETE", "/locks/%s?force=true", n) == 200, "force release");
	t0 = mono_ms();
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	took = mono_ms() - t0;
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75, "the lease-lost code 75, got %d: %s", code, err_of(&p));
	CHECK(file_contains(termed, "TERM"), "the command got SIGTERM");
	CHECK(strstr(err_of(&p), "lost") && strstr(err_of(&p), n), "stderr says so: %s",
	      err_of(&p));
	/* seen at the next heartbeat (a third of the lease), killed a grace later */
	CHECK(took >= 1000 && took < 1000 + 1000 + 1500LL * slow_factor(),
	      "SIGKILL after the 1 s grace: dlock ended %lld ms after the forced release",
	      (long long)took);

	/* one that stops on SIGTERM is not waited for the grace */
	dlock_start(&p, NULL, NULL, "forced2", "run", "--ttl", "3s", "--grace", "20s", m, "--",
		    "sleep", "60", NULL);
	CHECK(WAIT_FOR(flag_of(NULL, "locked", "/locks/%s", m) == 1, 5000), "dlock takes it");
	CHECK(status_of(NULL, "DELETE", "/locks/%s?force=true", m) == 200, "force release");
	t0 = mono_ms();
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75 && mono_ms() - t0 < 1000 + 1500LL * slow_factor(),
	      "75 within a heartbeat, not the 20 s grace (%d after %lld ms)", code,
	      (long long)(mono_ms() - t0));
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
	CHECK(WAIT_FOR((pid = number_in(pidfile)) > 0, 5000), "the command runs: %s", err_of(&p));
	dlockd_kill(&d);
	t0 = mono_ms();
	CHECK(WAIT_FOR(kill(-(pid_t)pid, 0) < 0 && errno == ESRCH, 10000),
	      "the command's group ends");
	took = mono_ms() - t0;
	/* the last renewal was at most 2 s before the kill: lease end + grace */
	CHECK(took <= 2000 + 1000 + 500LL * slow_factor(),
	      "stopped %lld ms after dlockd died: no later than the lease end plus the grace",
	      (long long)took);
	CHECK(took >= 1000 - 100, "but not before the lease could have ended (%lld ms)",
	      (long long)took);
	CHECK(WAIT_FOR(proc_exited(&p), 3000), "dlock ends soon after (one try to release)");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75, "the lease-lost code 75, got %d: %s", code, err_of(&p));
	CHECK(strstr(err_of(&p), "no renewal"), "stderr says why: %s", err_of(&p));
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
	CHECK(WAIT_FOR((pid = number_in(pidfile)) > 0, 5000), "the command runs: %s", err_of(&p));
	CHECK(kill(p.pid, SIGTERM) == 0, "SIGTERM to dlock");
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 128 + SIGTERM, "the shell died of SIGTERM: 143, got %d: %s", code,
	      err_of(&p));
	CHECK(kill(-(pid_t)pid, 0) < 0 && errno == ESRCH,
	      "its sleep got the SIGTERM too: the group is gone");
	CHECK(!strstr(out_of(&p), "not reached"), "the shell did not go on");
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
	dlock_start(&p, NULL, NULL, "queue", "run", "--kind", "fair", n, "--", "true", NULL);
	CHECK(WAIT_FOR(queue_length(n) == 1, 5000), "dlock queues");
	CHECK(kill(p.pid, SIGINT) == 0, "SIGINT to dlock");
	CHECK(WAIT_FOR(proc_exited(&p), 5000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 128 + SIGINT, "130 for SIGINT, got %d: %s", code, err_of(&p));
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
	      err_of(&p));
	CHECK((code = dlock_wait(&q)) == 0, "--token-file: the run succeeds (%d: %s)", code,
	      err_of(&q));
	dlock_start(&p, d.base, NULL, "no-token", "run", "-n", n, "--", "true", NULL);
	CHECK((code = dlock_wait(&p)) == 77 && strstr(err_of(&p), "401"),
	      "no token: 77, saying 401 (%d: %s)", code, err_of(&p));
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

	snprintf(env, sizeof(env), "DLOCK=%s", dlock_bin());
	snprintf(script, sizeof(script),
		 "set -e\n"
		 "eval \"$($DLOCK acquire --ttl 20s %s)\"\n"
		 "echo token=$DLOCK_FENCING_TOKEN owner=$DLOCK_OWNER\n"
		 "$DLOCK status %s >/dev/null\n"
		 "$DLOCK list %s\n"
		 "if $DLOCK run -n %s -- true 2>/dev/null; then exit 10; fi\n"
		 "$DLOCK renew --ttl 20s\n"
		 "$DLOCK release\n"
		 "if $DLOCK status %s >/dev/null; then exit 11; fi\n"
		 "if $DLOCK release; then exit 12; else echo second release $?; fi\n",
		 n, n, n, n, n);
	{
		const char *argv[] = { "sh", "-c", script, NULL };
		char server[128];
		const char *envv[] = { server, env, NULL };

		snprintf(server, sizeof(server), "DLOCK_SERVER=%s", H_dlockd.base);
		proc_start(&p, argv, envv, "steps");
	}
	CHECK((code = dlock_wait(&p)) == 0, "the script runs through (%d): %s %s", code,
	      out_of(&p), err_of(&p));
	CHECK(strstr(out_of(&p), "token=1") && strstr(out_of(&p), n) &&
	      strstr(out_of(&p), "second release 75"),
	      "acquire's assignments, list's line, release's 75 when not held: %s", out_of(&p));
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "released");
}
