/* run.c -- `dlock run`: take a lock, run a command in a process group of
 * its own while renewing the lease every third of it, and release.
 *
 * One loop waits on the heartbeat in flight, a signalfd (SIGCHLD and the
 * four signals forwarded to the group) and the next deadline. The promise
 * it keeps: nothing of the command's group runs past the end of the lease
 * dlock can count on (counted from when the last renewal that succeeded
 * was sent) by more than --grace. So when the lease is lost -- a heartbeat
 * answered not_held, or none succeeded before the lease would end -- the
 * group gets SIGTERM, then SIGKILL after the grace; and when the command
 * exits, whatever it left running in its group is stopped the same way
 * before the lock is released. dlock is the group's subreaper, so it reaps
 * orphans too and sees when the group is empty. If dlock itself dies, the
 * command gets SIGKILL (PR_SET_PDEATHSIG): nobody would renew its lease. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

struct supervisor {
	struct lease *l;
	const struct run_opts *o;
	int sigfd;
	pid_t pgid;		/* the command, leader of its own group */
	bool leader_done;
	int leader_status;	/* its wait status, once done */
	bool lost;		/* the lease is gone: the group is being stopped */
	bool stopping;		/* SIGTERM sent to the group */
	bool killed;		/* SIGKILL too */
	int64_t kill_at;
	bool renewing;		/* a heartbeat is in flight */
	int64_t renew_sent;
	int64_t next_renew;
};

const char *run_signal_name(int sig)
{
	switch (sig) {
	case SIGINT: return "SIGINT";
	case SIGTERM: return "SIGTERM";
	case SIGHUP: return "SIGHUP";
	case SIGQUIT: return "SIGQUIT";
	default: return "a signal";
	}
}

/* The next signal waiting on sigfd, 0 if none. */
static int next_signal(int sigfd)
{
	struct signalfd_siginfo si;

	if (read(sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return 0;
	return (int)si.ssi_signo;
}

static bool group_alive(pid_t pgid)
{
	return kill(-pgid, 0) == 0 || errno != ESRCH;
}

/* ----- Starting the command ----- */

/* Fork and exec argv in a group of its own with the lock in its
 * environment. -1 with *err set when it could not be run. */
static pid_t spawn(const struct lease *l, char *const argv[], const sigset_t *mask, int *err)
{
	pid_t parent = getpid(), pid;
	int p[2], e = 0;
	char token[32];
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0) {
		*err = errno;
		return -1;
	}
	snprintf(token, sizeof(token), "%lld", l->fencing_token);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)	/* dlock died before the line above */
			_exit(EXIT_LOST);
		sigprocmask(SIG_SETMASK, mask, NULL);
		setenv("DLOCK_NAME", l->name, 1);
		setenv("DLOCK_KIND", lease_kind_name(l->kind), 1);
		setenv("DLOCK_OWNER", l->owner, 1);
		setenv("DLOCK_FENCING_TOKEN", token, 1);
		execvp(argv[0], argv);
		e = errno;
		if (write(p[1], &e, sizeof(e)) < 0)
			_exit(EXIT_CANNOT_EXEC);
		_exit(EXIT_CANNOT_EXEC);
	}
	close(p[1]);
	if (pid < 0) {
		*err = errno;
		close(p[0]);
		return -1;
	}
	setpgid(pid, pid);	/* also here: no signal may reach a group not yet made */
	do
		n = read(p[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n == (ssize_t)sizeof(e)) {
		waitpid(pid, NULL, 0);
		*err = e;
		return -1;
	}
	return pid;
}

/* ----- Supervising it ----- */

static void reap(struct supervisor *s)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == s->pgid) {
			s->leader_done = true;
			s->leader_status = status;
		}
	}
}

static void stop_group(struct supervisor *s, int64_t now)
{
	if (s->stopping)
		return;
	s->stopping = true;
	s->kill_at = now + s->o->grace_ms;
	kill(-s->pgid, SIGTERM);
}

static void lose(struct supervisor *s, int64_t now, const char *why)
{
	if (s->lost)
		return;
	s->lost = true;
	if (s->renewing) {
		client_abort(s->l->client);
		s->renewing = false;
	}
	lease_say(s->l, "%s: stopping the command (SIGTERM, SIGKILL after %lld ms)", why,
	     (long long)s->o->grace_ms);
	stop_group(s, now);
}

static void renewal_done(struct supervisor *s, int64_t now)
{
	struct answer a;
	enum lease_outcome out;

	client_finish(s->l->client, &a);
	s->renewing = false;
	out = lease_renewed(s->l, &a, s->renew_sent);
	answer_release(&a);
	if (out == LEASE_OK) {
		s->next_renew = s->renew_sent + s->l->ttl_ms / 3;
	} else if (out == LEASE_LOST) {
		lose(s, now, "the lease is lost (dlockd says it is not held)");
	} else {
		/* try again soon, a few times before the lease ends */
		int64_t in = (s->l->end_ms - now) / 4;

		s->next_renew = now + (in < 100 ? 100 : in > 1000 ? 1000 : in);
	}
}

/* Wait for the next event (at most until the nearest deadline) and
 * handle it. */
static void step(struct supervisor *s)
{
	int64_t now = mono_ms(), wait = 1000;
	int sig;

	if (!s->lost && s->l->end_ms - now < wait)
		wait = s->l->end_ms - now;
	if (!s->lost && !s->renewing && s->next_renew - now < wait)
		wait = s->next_renew - now;
	if (s->stopping && !s->killed && s->kill_at - now < wait)
		wait = s->kill_at - now;
	if (wait < 0)
		wait = 0;
	if (s->renewing) {
		if (client_poll(s->l->client, s->sigfd, (int)wait))
			renewal_done(s, mono_ms());
	} else {
		struct pollfd p = { .fd = s->sigfd, .events = POLLIN };

		poll(&p, 1, (int)wait);
	}
	while ((sig = next_signal(s->sigfd)) > 0) {
		if (sig == SIGCHLD)
			reap(s);
		else if (group_alive(s->pgid))
			kill(-s->pgid, sig);
	}
}

static int supervise(struct supervisor *s)
{
	for (;;) {
		int64_t now = mono_ms();

		if (!s->lost && now >= s->l->end_ms)
			lose(s, now, "the lease ended with no renewal that dlockd confirmed");
		if (s->stopping && !s->killed && now >= s->kill_at) {
			s->killed = true;
			kill(-s->pgid, SIGKILL);
		}
		reap(s);
		if (s->leader_done && !group_alive(s->pgid))
			break;
		if (s->leader_done && !s->stopping) {
			lease_say(s->l, "the command exited: stopping what it left running in its "
			     "process group before releasing");
			stop_group(s, now);
		}
		if (!s->lost && !s->renewing && now >= s->next_renew) {
			int64_t left = s->l->end_ms - now;

			s->renewing = true;
			s->renew_sent = now;
			lease_renew_start(s->l, (long)(left < s->l->ttl_ms / 3 ? left
							  : s->l->ttl_ms / 3));
		}
		step(s);
	}
	if (s->renewing)
		client_abort(s->l->client);
	if (s->lost)
		return EXIT_LOST;
	if (WIFSIGNALED(s->leader_status))
		return 128 + WTERMSIG(s->leader_status);
	return WEXITSTATUS(s->leader_status);
}

/* ----- dlock run ----- */

int run_signalfd(bool chld, sigset_t *old)
{
	sigset_t set;
	int fd;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	if (chld)
		sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, old);
	fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		perror("dlock: signalfd");
	return fd;
}

int run_signal_taken(int sigfd)
{
	int sig = next_signal(sigfd);

	return sig > 0 ? sig : SIGTERM;
}

int run_command(struct lease *l, const struct run_opts *o, char *const argv[])
{
	struct supervisor s = { .l = l, .o = o };
	sigset_t old;
	int status, err = 0, sig;

	s.sigfd = run_signalfd(true, &old);
	if (s.sigfd < 0)
		return EXIT_UNAVAILABLE;
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	switch (lease_acquire(l, o->wait_ms, s.sigfd)) {
	case LEASE_OK:
		break;
	case LEASE_CONFLICT:
		status = o->conflict_exit;
		goto out;
	case LEASE_INTERRUPTED:
		sig = run_signal_taken(s.sigfd);
		lease_say(l, "%s while waiting: gave up", run_signal_name(sig));
		status = 128 + sig;
		goto out;
	case LEASE_REFUSED:
		status = EXIT_REFUSED;
		goto out;
	case LEASE_INVALID:
		status = EXIT_USAGE;
		goto out;
	default:
		status = EXIT_UNAVAILABLE;
		goto out;
	}

	s.next_renew = mono_ms() + l->ttl_ms / 3;
	s.pgid = spawn(l, argv, &old, &err);
	if (s.pgid < 0) {
		lease_say(l, "cannot run '%s': %s", argv[0], strerror(err));
		status = err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
	} else {
		status = supervise(&s);
	}
	/* a lost lease is gone (or ends by itself): one try, no patience */
	lease_release(l, false, s.lost, !s.lost);
out:
	close(s.sigfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}
