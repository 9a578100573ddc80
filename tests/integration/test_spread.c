/* test_spread.c -- waiters spread over a loop's libmicrohttpd daemons
 * (api/server.c deals connections to DAEMONS_PER_LOOP of them in turn
 * once SPREAD_AT requests are suspended):
 * every waiter is served exactly once, a fair lock's order holds across
 * daemons and loops, a hang-up among them costs nobody their turn, and a
 * shutdown answers every one of them. Raw connections, one per waiter. */
#include "../harness/harness.h"

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Enough waiting connections that each of two loops deals them over all
 * its 32 daemons (past its first SPREAD_AT = 64 suspended, which all go to
 * its first daemon). */
enum { N = 320 };

static const char *const two_loops[] = { "--threads", "2", NULL };

/* A new connection to d with method path sent on it; -1 if it failed. */
static int open_req(const struct dlockd_srv *d, const char *method, const char *path)
{
	int fd = raw_connect(d->port);

	if (fd >= 0 && !raw_send(fd, method, path, NULL)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Has fd something to read now? */
static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

/* Hang up the waiters first, first + step, ... of fd[N] (each then -1);
 * how many are left. */
static int hang_up_every(int fd[N], int first, int step)
{
	int live = 0;

	for (int i = first; i < N; i += step) {
		close(fd[i]);
		fd[i] = -1;
	}
	for (int i = 0; i < N; i++)
		live += fd[i] >= 0;
	return live;
}

/* The first live fd of fds[] (-1: hung up) other than skip that has
 * something to read, or -1. */
static int any_readable(const int *fds, int n, int skip)
{
	for (int i = 0; i < n; i++)
		if (i != skip && fds[i] >= 0 && readable(fds[i]))
			return i;
	return -1;
}

TEST(fair_waiters_on_every_daemon_are_served_in_queue_order_past_hang_ups)
{
	struct dlockd_srv d;
	const char *n = lockname("spreadfair");
	char p[512];
	int fd[N], live;

	CHECK(dlockd_start(&d, NULL, two_loops) == 0, "start dlockd --threads 2");
	CHECK(status_of(&d, "PUT", "/fairlocks/%s?owner=holder&ttl_ms=60000", n) == 200,
	      "holder takes %s", n);
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=w%d&wait_ms=60000", n, i);
		fd[i] = open_req(&d, "PUT", p);
		CHECK(fd[i] >= 0, "waiter %d sent", i);
		CHECK(WAIT_FOR(rcmd_int("LLEN redisson_lock_queue:{%s}", n) == i + 1, 5000),
		      "waiter %d queued, in the order sent", i);
	}
	/* a hang-up on several daemons: their places go, nobody else's */
	live = hang_up_every(fd, 3, 37);
	CHECK(WAIT_FOR(waiters_of(&d) == live, 5000 * slow_factor()),
	      "the hung-up waiters are forgotten (%.0f of %d wait)", waiters_of(&d), live);
	CHECK(status_of(&d, "DELETE", "/fairlocks/%s?owner=holder", n) == 200, "holder leaves");
	for (int i = 0; i < N; i++) {
		int other;

		if (fd[i] < 0)
			continue;
		CHECK(raw_read(fd[i], 10000 * slow_factor(), NULL) == 200, "w%d served, in its turn", i);
		other = any_readable(fd, N, i);
		CHECK(other < 0, "nobody but w%d has an answer while it holds (w%d has)", i, other);
		snprintf(p, sizeof(p), "/fairlocks/%s?owner=w%d", n, i);
		CHECK(raw_send(fd[i], "DELETE", p, NULL) &&
		      raw_read(fd[i], 10000 * slow_factor(), NULL) == 200,
		      "w%d releases on its kept-alive connection", i);
	}
	sleep_ms(200);	/* a second answer anywhere would be a waiter served twice */
	CHECK(any_readable(fd, N, -1) < 0, "every waiter answered exactly once");
	CHECK(flag_of(&d, "locked", "/fairlocks/%s", n) == 0, "%s is free at the end", n);
	CHECK(waiters_of(&d) == 0, "nobody waits");
	for (int i = 0; i < N; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(plain_waiters_on_every_daemon_are_each_served_once_then_shutdown_answers_all)
{
	struct dlockd_srv d;
	const char *n = lockname("spreadplain");
	char p[512];
	int fd[N], served[N] = { 0 }, live, grants = 0, rc;
	int64_t until, t0;

	CHECK(dlockd_start(&d, NULL, two_loops) == 0, "start dlockd --threads 2");
	CHECK(lock_hold(&d, n, "holder", 60000), "holder takes %s", n);
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof(p), "/locks/%s?owner=w%d&wait_ms=60000", n, i);
		fd[i] = open_req(&d, "PUT", p);
		CHECK(fd[i] >= 0, "waiter %d sent", i);
	}
	CHECK(wait_waiters(&d, N, 10000 * slow_factor()), "%d waiters (%.0f)", N, waiters_of(&d));
	live = hang_up_every(fd, 5, 29);
	CHECK(WAIT_FOR(waiters_of(&d) == live, 5000 * slow_factor()),
	      "the hung-up waiters are forgotten (%.0f of %d wait)", waiters_of(&d), live);
	CHECK(lock_release(&d, n, "holder") == 200, "holder releases");
	/* one at a time: whoever is served holds until it releases */
	until = mono_ms() + 60000 * slow_factor();
	while (grants < live && mono_ms() < until) {
		int i = any_readable(fd, N, -1), other;

		if (i < 0) {
			sleep_ms(1);
			continue;
		}
		CHECK(raw_read(fd[i], 5000 * slow_factor(), NULL) == 200, "w%d granted", i);
		CHECK(++served[i] == 1, "w%d served once", i);
		grants++;
		other = any_readable(fd, N, i);
		CHECK(other < 0, "nobody but w%d has an answer while it holds (w%d has)", i, other);
		snprintf(p, sizeof(p), "/locks/%s?owner=w%d", n, i);
		CHECK(raw_send(fd[i], "DELETE", p, NULL) &&
		      raw_read(fd[i], 10000 * slow_factor(), NULL) == 200,
		      "w%d releases", i);
	}
	CHECK(grants == live, "%d of %d live waiters served", grants, live);
	for (int i = 0; i < N; i++)
		if (fd[i] >= 0)
			close(fd[i]);

	/* a shutdown with waiters on every daemon answers each of them */
	CHECK(lock_hold(&d, n, "holder", 60000), "holder takes %s again", n);
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof(p), "/locks/%s?owner=s%d&wait_ms=60000", n, i);
		fd[i] = open_req(&d, "PUT", p);
		CHECK(fd[i] >= 0, "waiter %d sent", i);
	}
	CHECK(wait_waiters(&d, N, 10000 * slow_factor()), "%d waiters again", N);
	t0 = mono_ms();
	rc = dlockd_stop(&d, 10000);
	CHECK(rc == 0, "exit status 0 after SIGTERM, got %d", rc);
	CHECK(mono_ms() - t0 < 5000 * slow_factor(), "stopped in %lld ms",
	      (long long)(mono_ms() - t0));
	for (int i = 0; i < N; i++) {
		CHECK(raw_read(fd[i], 2000, NULL) == 503, "waiter s%d answered 503 at shutdown", i);
		close(fd[i]);
	}
	snprintf(p, sizeof(p), "/locks/%s?force=true", n);
	req("DELETE", p, NULL);
}

/* Count the open fds of process pid; -1 if /proc does not say. */
static int open_fds(pid_t pid)
{
	char dir[64];
	DIR *dp;
	struct dirent *e;
	int n = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(dp = opendir(dir)))
		return -1;
	while ((e = readdir(dp)))
		n += e->d_name[0] != '.';
	closedir(dp);
	return n;
}

/* The daemons are shared by the loops: many threads do not multiply the
 * fds they take (32 a loop: 557 fds at --threads 16, over 2,000 at 64, past
 * the 1,024 a service is often limited to), and every loop still serves. */
TEST(many_threads_share_the_daemons_and_their_fds)
{
	static const char *const sixteen[] = { "--threads", "16", NULL };
	struct dlockd_srv d;
	const char *n = lockname("spreadfds");
	int fds, rc;

	CHECK(dlockd_start(&d, NULL, sixteen) == 0, "start dlockd --threads 16");
	fds = open_fds(d.pid);
	CHECK(fds > 0 && fds < 300, "dlockd --threads 16 has %d fds open (want < 300)", fds);
	for (int i = 0; i < 40; i++) {
		CHECK(lock_hold(&d, n, "a", 30000), "round %d: a takes %s", i, n);
		CHECK(lock_release(&d, n, "a") == 200, "round %d: a releases", i);
	}
	rc = dlockd_stop(&d, 10000);
	CHECK(rc == 0, "exit status 0 after SIGTERM, got %d", rc);
}
