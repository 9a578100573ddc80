/* test_examples.c -- the clients in examples/ against the suite's dlockd,
 * so that they do not rot: each one takes a lock, and a second copy run at
 * the same time waits for it (a unique owner per run; a shared one would
 * re-enter and both would "hold" it); Ctrl-C (SIGINT to its process group)
 * while holding releases the lock at once and the waiting copy gets it;
 * and with no dlockd listening each prints one readable line and fails.
 * client.py, client.mjs and client.go use the client libraries in clients/
 * (client.go through examples/go.mod's replace, built with GOPROXY=off:
 * nothing is downloaded). They need sh+curl, python3, node and go, which
 * make test installs; where go is missing (a suite run by hand) client.go
 * is left out with a note. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A copy of an example, run against url on lock. */
static void client_start(struct proc *c, const char *const argv[], const char *url,
			 const char *lock, const char *tag)
{
	char env_url[160], env_lock[160];
	const char *const env[] = { env_url, env_lock, NULL };

	snprintf(env_url, sizeof(env_url), "DLOCKD_URL=%s", url);
	snprintf(env_lock, sizeof(env_lock), "DLOCKD_LOCK=%s", lock);
	proc_start(c, argv, env, tag);
}

static bool says(const char *path, const char *needle)
{
	char buf[8192];

	return strstr(file_read(path, buf, sizeof(buf)), needle) != NULL;
}

static void two_copies_and_ctrl_c(const char *tag, const char *const argv[], struct proc *a,
				   struct proc *b)
{
	const char *lock = lockname(tag);
	char buf[8192];

	client_start(a, argv, H_dlockd.base, lock, tag);
	CHECK(WAIT_FOR(says(a->out, "acquired") || proc_exited(a), 20000) && !proc_exited(a),
	      "%s: the first copy takes the lock: %s %s", tag, file_read(a->out, buf, sizeof(buf)),
	      file_read(a->err, buf + 4096, 4096));
	client_start(b, argv, H_dlockd.base, lock, tag);
	CHECK(WAIT_FOR(waiters_of(NULL) >= 1 || says(b->out, "acquired") ||
		       proc_exited(b), 20000),
	      "%s: the second copy starts", tag);
	CHECK(!says(b->out, "acquired") && !proc_exited(b),
	      "%s: the second copy waits while the first holds the lock: %s", tag,
	      file_read(b->out, buf, sizeof(buf)));
	CHECK(!proc_exited(a), "%s: the first copy is still working", tag);

	kill(-a->pid, SIGINT);		/* Ctrl-C */
	CHECK(WAIT_FOR(proc_exited(a), 10000), "%s: Ctrl-C stops the first copy", tag);
	CHECK(!proc_exit_code(a, 0), "%s: and it exits non-zero (status %#x)", tag, a->status);
	CHECK(says(a->out, "released") && !says(a->out, "done"),
	      "%s: it released the lock on Ctrl-C, before its work was done: %s", tag,
	      file_read(a->out, buf, sizeof(buf)));
	/* the lease is 15 s and the second copy waits up to 10 s: only a
	 * release lets it in now */
	CHECK(WAIT_FOR(says(b->out, "acquired") || proc_exited(b), 5000) &&
	      says(b->out, "acquired"), "%s: the waiting copy gets the lock at once: %s %s", tag,
	      file_read(b->out, buf, sizeof(buf)), file_read(b->err, buf + 4096, 4096));
	CHECK(WAIT_FOR(proc_exited(b), 20000) && proc_exit_code(b, 0),
	      "%s: the second copy works and exits 0: %s %s", tag, file_read(b->out, buf, sizeof(buf)),
	      file_read(b->err, buf + 4096, 4096));
	CHECK(says(b->out, "done, releasing") && says(b->out, "released"),
	      "%s: and releases: %s", tag, file_read(b->out, buf, sizeof(buf)));
	CHECK(flag_of(NULL, "locked", "/locks/%s", lock) == 0,
	      "%s: nothing holds the lock afterwards", tag);
}

static void dlockd_down(const char *tag, const char *const argv[], struct proc *c)
{
	char url[64], err[4096], out[4096];
	const char *nl;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", free_port());
	client_start(c, argv, url, lockname(tag), tag);
	CHECK(WAIT_FOR(proc_exited(c), 20000), "%s: gives up when dlockd is down", tag);
	CHECK(!proc_exit_code(c, 0), "%s: and exits non-zero", tag);
	file_read(c->err, err, sizeof(err));
	nl = strchr(err, '\n');
	CHECK(strstr(err, "cannot reach dlockd") && nl && nl[1] == '\0',
	      "%s: one readable line on stderr, got: '%s' (stdout '%s')", tag, err,
	      file_read(c->out, out, sizeof(out)));
}

static void check_example(const char *tag, const char *const argv[])
{
	struct proc a = { 0 }, b = { 0 }, c = { 0 };

	two_copies_and_ctrl_c(tag, argv, &a, &b);
	if (!test_failed())
		dlockd_down(tag, argv, &c);
	proc_kill(&a);
	proc_kill(&b);
	proc_kill(&c);
}

TEST(example_client_sh)
{
	static const char *const argv[] = { "sh", "examples/client.sh", NULL };

	check_example("sh", argv);
}

TEST(example_client_py)
{
	static const char *const argv[] = { "python3", "examples/client.py", NULL };

	check_example("py", argv);
}

TEST(example_client_mjs)
{
	static const char *const argv[] = { "node", "examples/client.mjs", NULL };

	check_example("mjs", argv);
}

TEST(example_client_go)
{
	char bin[300], cmd[700];
	const char *argv[] = { bin, NULL };

	if (system("command -v go >/dev/null 2>&1") != 0) {
		printf("# go is not installed: examples/client.go not run\n");
		return;
	}
	snprintf(bin, sizeof(bin), "%s/client-go", test_tmpdir());
	snprintf(cmd, sizeof(cmd),
		 "cd examples && GOPROXY=off GOFLAGS=-mod=mod go build -o '%s' client.go >'%s.log' 2>&1",
		 bin, bin);
	CHECK(system(cmd) == 0, "go build examples/client.go (see %s.log)", bin);
	check_example("go", argv);
}
