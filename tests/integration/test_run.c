/* test_run.c -- `make run` exactly as README.md and docs/getting-started.md give it, in a scratch
 * copy of this checkout (with its build/ copied along, so that only the
 * version object is rebuilt): DLOCKD_LISTEN=127.0.0.1:PORT make run serves
 * there with a private redis-server; SIGTERM to make, or SIGINT to the
 * whole process group as a terminal's Ctrl-C sends it, stops dlockd and
 * that redis-server; and a dlockd that cannot start leaves no redis-server
 * behind. Processes are checked by the pids `make run` logs, and no process
 * may be left whose working directory is in the copy. */
#include "../harness/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct run {
	char dir[PATH_MAX];	/* the scratch copy */
	char log[PATH_MAX + 16];
	char base[64];
	pid_t make;		/* also its process group */
	pid_t redis, dlockd;	/* from the log */
	int status;		/* make's wait status once reaped */
	bool reaped;
	int held_fd;		/* a port held to make dlockd fail, or 0 */
};

/* A pid that still runs (a zombie has finished). */
static bool running(pid_t pid)
{
	char path[64], buf[256], *paren;
	FILE *f;
	bool alive = false;

	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f) && (paren = strrchr(buf, ')')))
		alive = paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
	fclose(f);
	return alive;
}

/* The first process other than this one whose working directory is in
 * dir, or 0. */
static pid_t process_in(const char *dir)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = strlen(dir);
	pid_t found = 0;

	while (d && !found && (e = readdir(d))) {
		char link[300], cwd[PATH_MAX];
		pid_t pid = (pid_t)atoi(e->d_name);
		ssize_t len;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
		len = readlink(link, cwd, sizeof(cwd) - 1);
		if (len <= 0)
			continue;
		cwd[len] = '\0';
		if (!strncmp(cwd, dir, n) && (cwd[n] == '\0' || cwd[n] == '/') && running(pid))
			found = pid;
	}
	if (d)
		closedir(d);
	return found;
}

/* Copy this checkout (its git-tracked and untracked, not ignored, files;
 * every file outside git) to test_tmpdir()/name, without .git, and the
 * build directory of the binary under test if it is ./build. Returns 0. */
/* The build directory `make run` uses in the copy: the suite's make's
 * BUILD (it reaches us in the environment), else build. */
static const char *build_dir(void)
{
	const char *b = getenv("BUILD");

	return b && *b ? b : "build";
}

static int make_copy(struct run *r, const char *name)
{
	char cmd[2 * PATH_MAX + 512], bindir[PATH_MAX], here[PATH_MAX], *slash;
	const char *files;

	if (!getcwd(here, sizeof(here)))
		return -1;
	snprintf(r->dir, sizeof(r->dir), "%s/%s", test_tmpdir(), name);
	snprintf(r->log, sizeof(r->log), "%s.log", r->dir);
	if (mkdir(r->dir, 0755) < 0)
		return -1;
	if (access(".git", F_OK) == 0)
		files = "git ls-files -z -co --exclude-standard | "
			"tar --null -T - --ignore-failed-read -cf - 2>/dev/null";
	else
		files = "tar --exclude=./.git --exclude=./build --exclude='./build-*' "
			"--exclude=node_modules -cf - .";
	snprintf(cmd, sizeof(cmd), "%s | tar -xf - -C '%s'", files, r->dir);
	if (system(cmd) != 0)
		return -1;
	/* with build/ along (mtimes kept), make has nothing to rebuild but
	 * the version: the copy has no .git */
	if (!realpath(dlockd_binary(), bindir))
		return -1;
	slash = strrchr(bindir, '/');
	*slash = '\0';
	if (strlen(bindir) == strlen(here) + 6 && !strncmp(bindir, here, strlen(here)) &&
	    !strcmp(bindir + strlen(here), "/build")) {
		snprintf(cmd, sizeof(cmd), "tar --exclude=./build/run -cf - ./build | tar -xf - -C '%s'",
			 r->dir);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

/* DLOCKD_LISTEN=127.0.0.1:port make run, in r->dir, in a process group of
 * its own (a terminal's foreground job), output to r->log. */
static int start_make_run(struct run *r, int port)
{
	char listen[32];

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(r->base, sizeof(r->base), "http://%s", listen);
	r->make = fork();
	if (r->make == 0) {
		int fd = open(r->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		setpgid(0, 0);
		if (fd < 0 || chdir(r->dir) < 0)
			_exit(127);
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
		/* what the suite's own make passed down is not the user's */
		unsetenv("MAKEFLAGS");
		unsetenv("MAKELEVEL");
		unsetenv("MFLAGS");
		unsetenv("DLOCKD_REDIS_URL");
		setenv("DLOCKD_LISTEN", listen, 1);
		execlp("make", "make", "run", (char *)NULL);
		_exit(127);
	}
	if (r->make < 0)
		return -1;
	setpgid(r->make, r->make);
	return 0;
}

static bool make_exited(struct run *r)
{
	if (!r->reaped && waitpid(r->make, &r->status, WNOHANG) == r->make)
		r->reaped = true;
	return r->reaped;
}

/* The number after "(pid " or ", pid " on the first log line holding
 * needle; 0 if none. */
static pid_t pid_in_log(const struct run *r, const char *needle)
{
	FILE *f = fopen(r->log, "r");
	char line[4096], *p;
	pid_t pid = 0;

	while (f && !pid && fgets(line, sizeof(line), f))
		if (strstr(line, needle) && ((p = strstr(line, "pid ")) || (p = strstr(line, "pid=")) ||
					     (p = strstr(line, "\"pid\":"))))
			pid = (pid_t)atoi(p + strcspn(p, " =:") + 1);
	if (f)
		fclose(f);
	return pid;
}

static bool log_has(const struct run *r, const char *needle)
{
	FILE *f = fopen(r->log, "r");
	char line[4096];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}

static bool healthy(const char *base)
{
	struct http_resp h;
	bool ok = http_on(base, "GET", "/healthz", NULL, &h) == 0 && h.status == 200;

	http_free(&h);
	return ok;
}

/* Whatever a failed check left: by pid, ours only. */
static void clean_up(struct run *r)
{
	pid_t left;

	if (r->held_fd > 0)
		close(r->held_fd);
	if (r->make > 0 && !make_exited(r)) {
		kill(-r->make, SIGKILL);
		waitpid(r->make, &r->status, 0);
	}
	if (running(r->dlockd))
		kill(r->dlockd, SIGKILL);
	if (running(r->redis))
		kill(r->redis, SIGKILL);
	for (int i = 0; i < 10 && *r->dir && (left = process_in(r->dir)); i++) {
		kill(left, SIGKILL);
		sleep_ms(50);
	}
}

/* Start `make run` in a fresh copy and wait until it serves; *ok when it
 * does, with r->dlockd and r->redis known. */
static void start_serving(struct run *r, const char *name, bool *ok)
{
	char version[64] = "", want[128], dlock[PATH_MAX + 16];
	FILE *f;

	*ok = false;
	CHECK(make_copy(r, name) == 0, "copy the checkout to %s", r->dir);
	/* the quick start's second command is build/dlock: make run builds it
	 * (into the build directory of the make that runs the suite, which
	 * passes BUILD down: build-asan/ under make test-asan) */
	snprintf(dlock, sizeof(dlock), "%s/%s/dlock", r->dir, build_dir());
	unlink(dlock);
	CHECK(start_make_run(r, free_port()) == 0, "start make run");
	/* a copy without build/ compiles everything first */
	CHECK(WAIT_FOR(healthy(r->base) || make_exited(r), 300000) && !make_exited(r),
	      "make run serves on %s (see %s)", r->base, r->log);
	r->redis = pid_in_log(r, "private redis-server");
	r->dlockd = pid_in_log(r, "listening on");
	CHECK(running(r->redis) && running(r->dlockd),
	      "the log names the private redis-server (%d) and dlockd (%d) (see %s)",
	      (int)r->redis, (int)r->dlockd, r->log);
	f = popen("cat VERSION", "r");
	if (f) {
		if (fgets(version, sizeof(version), f))
			version[strcspn(version, "\n")] = '\0';
		pclose(f);
	}
	snprintf(want, sizeof(want), "dlockd %s listening", version);
	CHECK(*version && log_has(r, want),
	      "outside git the version is VERSION's, no commit: '%s' (see %s)", want, r->log);
	*ok = true;
}

/* The dlock line of docs/getting-started.md, as the page gives it, with DLOCKD_URL
 * pointing it at this make run's port (as the page says for
 * DLOCKD_LISTEN). */
static void dlock_through_it(struct run *r, bool *ok)
{
	char cmd[2 * PATH_MAX + 256];
	int rc;

	*ok = false;
	snprintf(cmd, sizeof(cmd), "cd '%s' && DLOCK_SERVER= DLOCKD_URL=%s %s/dlock run "
		 "nightly-report -- sh -c 'echo \"$DLOCK_NAME\"' >>'%s' 2>&1", r->dir, r->base,
		 build_dir(), r->log);
	rc = system(cmd);
	CHECK(rc == 0, "make run built build/dlock, and it runs a command under a lock (%d, see %s)",
	      rc, r->log);
	CHECK(log_has(r, "nightly-report"), "the command ran (see %s)", r->log);
	*ok = true;
}

static void lock_through_it(struct run *r, bool *ok)
{
	struct http_resp h;

	*ok = false;
	http_on(r->base, "PUT", "/locks/make-run-check?owner=newcomer", NULL, &h);
	CHECK_STATUS(h, 200, "make run hands out a lock");
	http_free(&h);
	http_on(r->base, "DELETE", "/locks/make-run-check?owner=newcomer", NULL, &h);
	CHECK_STATUS(h, 200, "and releases it");
	CHECK(json_bool(&h, "released") == 1, "released: %s", h.body);
	http_free(&h);
	*ok = true;
}

static void check_nothing_left(struct run *r)
{
	pid_t left;

	CHECK(WAIT_FOR(make_exited(r), 20000), "make run exits after the signal (see %s)", r->log);
	CHECK(WAIT_FOR(!running(r->dlockd), 5000), "dlockd (pid %d) is gone", (int)r->dlockd);
	CHECK(WAIT_FOR(!running(r->redis), 5000), "the private redis-server (pid %d) is gone",
	      (int)r->redis);
	left = process_in(r->dir);
	CHECK(left == 0, "no process left running in %s (pid %d is)", r->dir, (int)left);
	CHECK(log_has(r, "\"stopped\""), "dlockd stopped cleanly (see %s)", r->log);
}

static void stop_with(int sig, bool whole_group)
{
	struct run r = { 0 };
	bool ok;

	start_serving(&r, whole_group ? "run-ctrl-c" : "run-sigterm", &ok);
	if (ok)
		lock_through_it(&r, &ok);
	if (ok)
		dlock_through_it(&r, &ok);
	if (ok) {
		kill(whole_group ? -r.make : r.make, sig);
		check_nothing_left(&r);
	}
	clean_up(&r);
}

TEST(make_run_serves_and_sigterm_stops_dlockd_and_its_redis)
{
	stop_with(SIGTERM, false);
}

TEST(make_run_serves_and_ctrl_c_stops_dlockd_and_its_redis)
{
	stop_with(SIGINT, true);
}

static void port_taken(struct run *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t left;

	r->held_fd = fd;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 1) == 0 &&
	      getsockname(fd, (struct sockaddr *)&a, &len) == 0, "hold a port");
	CHECK(make_copy(r, "run-port-taken") == 0, "copy the checkout to %s", r->dir);
	CHECK(start_make_run(r, ntohs(a.sin_port)) == 0, "start make run");
	CHECK(WAIT_FOR(make_exited(r), 300000), "make run gives up (see %s)", r->log);
	CHECK(WIFEXITED(r->status) && WEXITSTATUS(r->status) != 0,
	      "make run fails when dlockd cannot listen (see %s)", r->log);
	CHECK(log_has(r, "cannot listen"), "dlockd says why (see %s)", r->log);
	r->redis = pid_in_log(r, "private redis-server");
	CHECK(r->redis > 0, "the private redis-server had started (see %s)", r->log);
	CHECK(WAIT_FOR(!running(r->redis), 5000), "and is gone (pid %d)", (int)r->redis);
	left = process_in(r->dir);
	CHECK(left == 0, "no process left running in %s (pid %d is)", r->dir, (int)left);
}

TEST(make_run_whose_dlockd_cannot_start_leaves_no_redis)
{
	struct run r = { 0 };

	port_taken(&r);
	clean_up(&r);
}
