/* test_harness.c -- the harness itself: a test that fails a CHECK while a
 * request of its own still runs in the background must not harm the tests
 * after it, and the runner must report that test's own failure; what a
 * test leaves running is ended (and reported) before the next test; a
 * thread it leaves running stops the run.
 *
 * The SELFTESTs below run only in child runs of this binary
 * (DLOCKD_SELFTEST=1, each with its own redis-server and dlockd), where
 * some fail on purpose; the TESTs at the end start those runs and check
 * their reports, so the suite itself stays green. */
#include "../harness/checker.h"
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The waiter of the first selftest gives up after WAITER_MS; the second
 * watches its stack for longer than that. */
enum { WAITER_MS = 2000, WATCH_MS = 3500, FILL = 64 * 1024, FILL_BYTE = 0x5a };

#define DELIBERATE "deliberate failure while a request waits in the background"
#define DELIBERATE_LOAD "deliberate failure while a load runs"

/* Take a lock, start a request that waits for it, fail. Not inlined and
 * called below a used pad, so that its struct bg lies deep inside the
 * stack the next selftest fills. */
static __attribute__((noinline)) void fail_while_a_request_waits(void)
{
	const char *n = lockname("held");
	char p[512];
	struct bg w;
	struct http_resp r;

	snprintf(p, sizeof(p), "/locks/%s?owner=holder", n);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "the holder takes the lock");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=waiter&wait_ms=%d", n, WAITER_MS * slow_factor());
	bg_start(&w, "PUT", p, NULL);
	CHECK(WAIT_FOR(waiters_of(NULL) == 1, 5000), "the request waits");
	CHECK(false, DELIBERATE);
	bg_join(&w);
	http_free(&w.r);
}

SELFTEST(selftest_stack_1_fails_while_a_request_waits)
{
	volatile char pad[8192];

	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] = 0;
	fail_while_a_request_waits();
	pad[0] = 1;
}

/* Offset of the first byte of fill that is no longer FILL_BYTE; -1 if none. */
static long changed_at(const volatile unsigned char *fill)
{
	for (long i = 0; i < FILL; i++)
		if (fill[i] != FILL_BYTE)
			return i;
	return -1;
}

SELFTEST(selftest_stack_2_next_test_has_its_stack_to_itself)
{
	volatile unsigned char fill[FILL];

	for (long i = 0; i < FILL; i++)
		fill[i] = FILL_BYTE;
	/* the request of the test before answers after WAITER_MS at the
	 * latest: watch until well past that */
	CHECK(!WAIT_FOR(changed_at(fill) >= 0, WATCH_MS),
	      "something wrote into this test's stack, at byte %ld of %d", changed_at(fill),
	      FILL);
	CHECK(waiters_of(NULL) == 0,
	      "the request of the test before is no longer waiting");
}

/* A request waiting on a held lock, never joined; the test passes
 * otherwise. (Its struct bg is static: the runner's rule is for a test
 * that forgets bg_join, not a licence to.) */
SELFTEST(selftest_left_1_forgets_a_bg_join)
{
	static struct bg w;
	const char *n = lockname("held");
	char p[512];
	struct http_resp r;

	snprintf(p, sizeof(p), "/locks/%s?owner=holder", n);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "the holder takes the lock");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?owner=waiter&wait_ms=%d", n, 3 * WAITER_MS * slow_factor());
	bg_start(&w, "PUT", p, NULL);
	CHECK(wait_waiters(NULL, 1, 5000), "the request waits");
}

static int ran_kept, ran_cancelled;

static void count_run(void *arg)
{
	++*(int *)arg;
}

/* A load of two clients and two test_at_end hooks (one cancelled), then a
 * failed CHECK. */
SELFTEST(selftest_left_2_fails_with_a_load_and_hooks)
{
	static const char *bases[1];
	struct load_opts o = {
		.prefix = lockname("load"), .bases = bases, .nbases = 1, .clients = 2,
		.ttl_ms = 1000, .wait_ms = 1000, .hold_max_ms = 5,
	};
	struct load *l;

	bases[0] = H_dlockd.base;
	test_at_end(count_run, &ran_kept);
	test_at_end(count_run, &ran_cancelled);
	test_at_end_cancel(&ran_cancelled);
	l = load_start(&o);
	CHECK(WAIT_FOR(load_grants(l) > 0, 5000), "the load runs");
	CHECK(false, DELIBERATE_LOAD);
}

SELFTEST(selftest_left_3_next_test_finds_all_ended)
{
	CHECK(ran_kept == 1 && ran_cancelled == 0, "hooks: kept ran %d times, cancelled %d",
	      ran_kept, ran_cancelled);
	/* the aborted request's connection is gone: dlockd drops the waiter */
	CHECK(wait_no_waiters(NULL, 1000), "the forgotten request no longer waits");
}

/* A thread of the test's own, blocked for good. */
static int never_fd[2] = { -1, -1 };

static void *blocked(void *arg)
{
	char c;

	(void)arg;
	if (read(never_fd[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

SELFTEST(selftest_thread_1_leaves_a_thread)
{
	pthread_t t;

	CHECK(pipe(never_fd) == 0, "pipe");
	CHECK(pthread_create(&t, NULL, blocked, NULL) == 0, "start a thread");
}

SELFTEST(selftest_thread_2_never_runs)
{
}

/* The whole output (stdout and stderr, NUL-terminated) of a child run of
 * the selftests whose names contain which; its wait status in *status.
 * NULL if it could not be started. */
static char *run_selftests(const char *which, int *status)
{
	char cmd[2048];
	size_t cap = 1 << 16, n = 0, got;
	char *out;
	FILE *f;

	/* this very binary, even if a rebuild has replaced the file since */
	snprintf(cmd, sizeof(cmd), "DLOCKD_SELFTEST=1 DLOCKD_BIN='%s' /proc/%d/exe %s 2>&1",
		 dlockd_binary(), (int)getpid(), which);
	f = popen(cmd, "r");
	if (!f)
		return NULL;
	out = malloc(cap);
	while ((got = fread(out + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (n + 1 == cap)
			out = realloc(out, cap *= 2);
	}
	out[n] = '\0';
	*status = pclose(f);
	return out;
}

/* The first line of out that starts with prefix (up to its newline, in
 * line); false if there is none. */
static bool first_line(const char *out, const char *prefix, char *line, size_t cap)
{
	size_t plen = strlen(prefix);

	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, prefix, plen)) {
			size_t len = strcspn(p, "\n");

			snprintf(line, cap, "%.*s", (int)len, p);
			return true;
		}
	}
	return false;
}

/* Remove the child run's private directory ("logs in /tmp/dlockd-test.X"):
 * it failed (on purpose), so it kept it. */
static void remove_child_tmpdir(const char *out)
{
	const char *p = strstr(out, "logs in /tmp/dlockd-test.");
	char dir[128], cmd[200];

	if (!p)
		return;
	p += strlen("logs in ");
	snprintf(dir, sizeof(dir), "%.*s", (int)strcspn(p, "\n '"), p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
}

static void print_indented(const char *out)
{
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		printf("#   | %.*s\n", (int)strcspn(p, "\n"), p);
}

/* The report of a run that must exit 1 (tests failed) without a sanitizer
 * report. */
static void check_exit_1(const char *out, int status)
{
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	      "the run exits 1 (tests failed), not %s %d",
	      WIFEXITED(status) ? "status" : "signal",
	      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	CHECK(!strstr(out, "Sanitizer") && !strstr(out, "runtime error"),
	      "no sanitizer report");
}

/* Run the selftests named with which; check() their output; print it if
 * the test failed, else remove the run's directory. */
static void selftest_run(const char *which, void (*check)(const char *out, int status))
{
	int status = -1;
	char *out = run_selftests(which, &status);

	CHECK(out, "run this binary with DLOCKD_SELFTEST=1");
	check(out, status);
	if (test_failed()) {
		printf("# the selftest run said:\n");
		print_indented(out);
	} else {
		remove_child_tmpdir(out);
	}
	free(out);
}

static void check_stack(const char *out, int status)
{
	char line[1024];

	check_exit_1(out, status);
	if (test_failed())
		return;
	CHECK(first_line(out, "# selftest_", line, sizeof(line)),
	      "the run reports a failure message");
	CHECK(strstr(line, "# selftest_stack_1_fails_while_a_request_waits: "
		      "tests/integration/test_harness.c:") && strstr(line, ": " DELIBERATE),
	      "the first failure reported is the deliberate one, not '%s'", line);
	CHECK(first_line(out, "not ok ", line, sizeof(line)) &&
	      !strncmp(line, "not ok 1 - selftest_stack_1_fails_while_a_request_waits (", 57),
	      "the failing test is reported as such, and only it: '%s'", line);
	CHECK(first_line(out, "ok 2 - selftest_stack_2_next_test_has_its_stack_to_itself (", line,
			 sizeof(line)), "the test after it passes");
	CHECK(first_line(out, "integration: 1 passed, 1 failed", line, sizeof(line)),
	      "the run counts one pass and one failure");
}

TEST(harness_a_failed_check_leaves_no_request_behind)
{
	selftest_run("selftest_stack_", check_stack);
}

static void check_left(const char *out, int status)
{
	char line[1024];

	check_exit_1(out, status);
	if (test_failed())
		return;
	CHECK(first_line(out, "# selftest_left_1_forgets_a_bg_join: ", line, sizeof(line)) &&
	      strstr(line, "left 1 background request(s) running"),
	      "a forgotten bg_join is reported: '%s'", line);
	CHECK(first_line(out, "not ok 1 - selftest_left_1_forgets_a_bg_join (", line,
			 sizeof(line)), "and fails the test");
	CHECK(first_line(out, "# selftest_left_2_fails_with_a_load_and_hooks: ", line,
			 sizeof(line)) && strstr(line, ": " DELIBERATE_LOAD),
	      "the deliberate failure is reported: '%s'", line);
	CHECK(first_line(out, "not ok 2 - selftest_left_2_fails_with_a_load_and_hooks (", line,
			 sizeof(line)), "and fails the test");
	CHECK(first_line(out, "ok 3 - selftest_left_3_next_test_finds_all_ended (", line,
			 sizeof(line)), "the test after them finds hooks run, requests ended");
	CHECK(first_line(out, "integration: 1 passed, 2 failed", line, sizeof(line)),
	      "the run counts one pass and two failures");
}

TEST(harness_ends_what_a_test_left_running)
{
	selftest_run("selftest_left_", check_left);
}

static void check_thread(const char *out, int status)
{
	char line[1024];

	check_exit_1(out, status);
	if (test_failed())
		return;
	CHECK(first_line(out, "# selftest_thread_1_leaves_a_thread: ", line, sizeof(line)) &&
	      strstr(line, "left 1 thread(s) running"), "the thread is reported: '%s'", line);
	CHECK(first_line(out, "not ok 1 - selftest_thread_1_leaves_a_thread (", line,
			 sizeof(line)), "and fails the test");
	CHECK(first_line(out, "Bail out! selftest_thread_1_leaves_a_thread left threads running",
			 line, sizeof(line)), "the run stops there");
	CHECK(!strstr(out, "selftest_thread_2"), "no later test runs");
}

TEST(harness_stops_the_run_when_a_test_leaves_a_thread)
{
	selftest_run("selftest_thread_", check_thread);
}
