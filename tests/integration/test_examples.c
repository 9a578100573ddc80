/* test_examples.c -- the clients in examples/ against the suite's dlockd,
 * so that they do not rot: each one takes a lock, and a second copy run at
 * the same time waits for it (a unique owner per run; a shared one would
 * re-enter and both would "hold" it); Ctrl-C (SIGINT to its process group)
 * while holding releases the lock at once and the waiting copy gets it;
 * and with no dlockd listening each prints one readable line and fails.
 * client.go runs only where `go` is installed (make test does not install
 * it); the others need sh+curl, python3 and node, which make test installs. */
#include "../harness/harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct client {
	pid_t pid;		/* also its process group */
	char out[400];		/* stdout */
	char err[400];		/* stderr */
	int status;
	bool reaped;
};

static void client_start(struct client *c, const char *const argv[], const char *url,
			 const char *lock, const char *tag)
{
	static int seq;

	memset(c, 0, sizeof(*c));
	snprintf(c->out, sizeof(c->out), "%s/example-%s-%d.out", test_tmpdir(), tag, ++seq);
	snprintf(c->err, sizeof(c->err), "%s/example-%s-%d.err", test_tmpdir(), tag, seq);
	c->pid = fork();
	if (c->pid == 0) {
		int out = open(c->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = open(c->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		setpgid(0, 0);
		if (out < 0 || err < 0)
			_exit(127);
		dup2(out, 1);
		dup2(err, 2);
		setenv("DLOCKD_URL", url, 1);
		setenv("DLOCKD_LOCK", lock, 1);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (c->pid > 0)
		setpgid(c->pid, c->pid);
}

static bool client_exited(struct client *c)
{
	if (!c->reaped && c->pid > 0 && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
		c->reaped = true;
	return c->reaped;
}

static bool client_ok(const struct client *c)
{
	return c->reaped && WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
}

static void client_kill(struct client *c)
{
	if (c->pid > 0 && !client_exited(c)) {
		kill(-c->pid, SIGKILL);
		waitpid(c->pid, &c->status, 0);
		c->reaped = true;
	}
}

/* The whole file (up to cap-1 bytes). */
static const char *slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, cap - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
	return buf;
}

static bool says(const char *path, const char *needle)
{
	char buf[8192];

	return strstr(slurp(path, buf, sizeof(buf)), needle) != NULL;
}

static void two_copies_and_ctrl_c(const char *tag, const char *const argv[], struct client *a,
				   struct client *b)
{
	const char *lock = lockname(tag);
	char buf[8192];

	client_start(a, argv, H_dlockd.base, lock, tag);
	CHECK(WAIT_FOR(says(a->out, "acquired") || client_exited(a), 20000) && !client_exited(a),
	      "%s: the first copy takes the lock: %s %s", tag, slurp(a->out, buf, sizeof(buf)),
	      slurp(a->err, buf + 4096, 4096));
	client_start(b, argv, H_dlockd.base, lock, tag);
	CHECK(WAIT_FOR(waiters_of(NULL) >= 1 || says(b->out, "acquired") ||
		       client_exited(b), 20000),
	      "%s: the second copy starts", tag);
	CHECK(!says(b->out, "acquired") && !client_exited(b),
	      "%s: the second copy waits while the first holds the lock: %s", tag,
	      slurp(b->out, buf, sizeof(buf)));
	CHECK(!client_exited(a), "%s: the first copy is still working", tag);

	kill(-a->pid, SIGINT);		/* Ctrl-C */
	CHECK(WAIT_FOR(client_exited(a), 10000), "%s: Ctrl-C stops the first copy", tag);
	CHECK(!client_ok(a), "%s: and it exits non-zero (status %#x)", tag, a->status);
	CHECK(says(a->out, "released") && !says(a->out, "done"),
	      "%s: it released the lock on Ctrl-C, before its work was done: %s", tag,
	      slurp(a->out, buf, sizeof(buf)));
	/* the lease is 15 s and the second copy waits up to 10 s: only a
	 * release lets it in now */
	CHECK(WAIT_FOR(says(b->out, "acquired") || client_exited(b), 5000) &&
	      says(b->out, "acquired"), "%s: the waiting copy gets the lock at once: %s %s", tag,
	      slurp(b->out, buf, sizeof(buf)), slurp(b->err, buf + 4096, 4096));
	CHECK(WAIT_FOR(client_exited(b), 20000) && client_ok(b),
	      "%s: the second copy works and exits 0: %s %s", tag, slurp(b->out, buf, sizeof(buf)),
	      slurp(b->err, buf + 4096, 4096));
	CHECK(says(b->out, "done, releasing") && says(b->out, "released"),
	      "%s: and releases: %s", tag, slurp(b->out, buf, sizeof(buf)));
	CHECK(flag_of(NULL, "locked", "/locks/%s", lock) == 0,
	      "%s: nothing holds the lock afterwards", tag);
}

static void dlockd_down(const char *tag, const char *const argv[], struct client *c)
{
	char url[64], err[4096], out[4096];
	const char *nl;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", free_port());
	client_start(c, argv, url, lockname(tag), tag);
	CHECK(WAIT_FOR(client_exited(c), 20000), "%s: gives up when dlockd is down", tag);
	CHECK(!client_ok(c), "%s: and exits non-zero", tag);
	slurp(c->err, err, sizeof(err));
	nl = strchr(err, '\n');
	CHECK(strstr(err, "cannot reach dlockd") && nl && nl[1] == '\0',
	      "%s: one readable line on stderr, got: '%s' (stdout '%s')", tag, err,
	      slurp(c->out, out, sizeof(out)));
}

static void check_example(const char *tag, const char *const argv[])
{
	struct client a = { 0 }, b = { 0 }, c = { 0 };

	two_copies_and_ctrl_c(tag, argv, &a, &b);
	if (!test_failed())
		dlockd_down(tag, argv, &c);
	client_kill(&a);
	client_kill(&b);
	client_kill(&c);
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
	snprintf(cmd, sizeof(cmd), "cd examples && go build -o '%s' client.go >'%s.log' 2>&1", bin,
		 bin);
	CHECK(system(cmd) == 0, "go build examples/client.go (see %s.log)", bin);
	check_example("go", argv);
}
