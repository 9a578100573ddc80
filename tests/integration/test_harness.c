/* test_harness.c -- the harness itself: a test that fails a CHECK while a
 * request of its own still runs in the background must not harm the tests
 * after it, and the runner must report that test's own failure.
 *
 * The SELFTESTs below run only in a child run of this binary
 * (DLOCKD_SELFTEST=1, with its own redis-server and dlockd), where the
 * first fails on purpose; the TEST at the end starts that run and checks
 * its report, so the suite itself stays green. */
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
	CHECK(WAIT_FOR(metric_value(&H_dlockd, "dlockd_waiters") == 1, 5000), "the request waits");
	CHECK(false, DELIBERATE);
	bg_join(&w);
	http_free(&w.r);
}

SELFTEST(selftest_1_fails_while_a_request_waits)
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

SELFTEST(selftest_2_next_test_has_its_stack_to_itself)
{
	volatile unsigned char fill[FILL];

	for (long i = 0; i < FILL; i++)
		fill[i] = FILL_BYTE;
	/* the request of the test before answers after WAITER_MS at the
	 * latest: watch until well past that */
	CHECK(!WAIT_FOR(changed_at(fill) >= 0, WATCH_MS),
	      "something wrote into this test's stack, at byte %ld of %d", changed_at(fill),
	      FILL);
	CHECK(metric_value(&H_dlockd, "dlockd_waiters") == 0,
	      "the request of the test before is no longer waiting");
}

/* The child run's whole output (stdout and stderr), NUL-terminated; its
 * wait status in *status. NULL if it could not be started. */
static char *run_selftests(int *status)
{
	char exe[512], cmd[2048];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t cap = 1 << 16, n = 0, got;
	char *out;
	FILE *f;

	if (len <= 0)
		return NULL;
	exe[len] = '\0';
	snprintf(cmd, sizeof(cmd), "DLOCKD_SELFTEST=1 DLOCKD_BIN='%s' '%s' selftest_ 2>&1",
		 dlockd_binary(), exe);
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

static void check_selftest_run(const char *out, int status)
{
	char line[1024];

	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	      "the run exits 1 (one test failed), not %s %d",
	      WIFEXITED(status) ? "status" : "signal",
	      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	CHECK(!strstr(out, "Sanitizer") && !strstr(out, "runtime error"),
	      "no sanitizer report");
	CHECK(first_line(out, "# selftest_", line, sizeof(line)),
	      "the run reports a failure message");
	CHECK(strstr(line, "# selftest_1_fails_while_a_request_waits: "
		      "tests/integration/test_harness.c:") && strstr(line, ": " DELIBERATE),
	      "the first failure reported is the deliberate one, not '%s'", line);
	CHECK(first_line(out, "not ok ", line, sizeof(line)) &&
	      !strncmp(line, "not ok 1 - selftest_1_fails_while_a_request_waits (", 51),
	      "the failing test is reported as such, and only it: '%s'", line);
	CHECK(first_line(out, "ok 2 - selftest_2_next_test_has_its_stack_to_itself (", line,
			 sizeof(line)), "the test after it passes");
	CHECK(first_line(out, "integration: 1 passed, 1 failed", line, sizeof(line)),
	      "the run counts one pass and one failure");
}

TEST(harness_a_failed_check_leaves_no_request_behind)
{
	int status = -1;
	char *out = run_selftests(&status);

	CHECK(out, "run %s with DLOCKD_SELFTEST=1", "this binary");
	check_selftest_run(out, status);
	if (test_failed()) {
		printf("# the selftest run said:\n");
		print_indented(out);
	} else {
		remove_child_tmpdir(out);
	}
	free(out);
}
