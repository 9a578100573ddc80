/* run.c -- `dlock run`: take a lock, run a command in a process group of
 * its own while renewing the lease, and release.
 *
 * One loop waits on the heartbeat in flight, a signalfd (SIGCHLD and the
 * signals forwarded to the group) and the next deadline. The promise it
 * keeps: nothing of the command's group runs outside the lease dlock can
 * count on (it ends ttl after the sending of the last renewal dlockd
 * confirmed). So the stop happens inside the lease: with no renewal
 * confirmed by the lease's end less the margin (MARGIN_*) less --grace,
 * the group gets SIGTERM, and SIGKILL the grace later, the margin before
 * the lease ends; renewals go out every third of the time before that
 * SIGTERM, so one lost renewal leaves another try. A heartbeat answered not_held means the
 * lease is gone already: SIGTERM at once, SIGKILL after the grace (never
 * past the margin before the lease's end). When the command exits,
 * whatever it left running in its group is stopped the same way before
 * the lock is released. dlock is the group's subreaper, so it reaps
 * orphans too and sees when the group is empty. If dlock itself dies, the
 * command gets SIGKILL (PR_SET_PDEATHSIG): nobody would renew its lease.
 * One lock (not a session's) is watched (watch.h): a change of its state
 * sends a renewal at once, so a forced release stops the command within a
 * round trip, not a third of the lease later. */
#include "run.h"

#include "watch.h"

#include <dirent.h>
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

/* What dlock keeps between the SIGKILL and the lease's end as it counts it:
 * a share of the lease for a clock of dlock's that runs slower than Redis'
 * (which times the lease) -- far more than any clock's drift, some room for
 * a busy machine -- and a few milliseconds for rounding. */
#define MARGIN_PERCENT 3
#define MARGIN_MS 10

/* Renewals a change of the lock's state sends come at most this often (a
 * busy semaphore or read lock changes often). */
#define NUDGE_GAP_MS 100

/* The watch's signal: a change of the lock's state (read, not forwarded). */
#define WATCH_SIGNAL SIGRTMIN

struct supervisor {
	struct lease *l;
	const struct run_opts *o;
	int sigfd;
	pid_t pgid;		/* the command, leader of its own group */
	bool leader_done;
	int leader_status;	/* its wait status, once done */
	bool lost;		/* the lease is gone or past saving: the group is
				 * being stopped, nothing more is renewed */
	bool stopping;		/* SIGTERM sent to the group */
	bool killed;		/* SIGKILL too */
	int64_t term_sent;	/* when the SIGTERM was sent */
	int64_t margin_ms;	/* kept from the lease's end (MARGIN_*) */
	int64_t renew_every;	/* a third of what the lease leaves before term_by() */
	bool renewing;		/* a heartbeat is in flight */
	bool renew_again;	/* the state changed since it was sent */
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
	case SIGUSR1: return "SIGUSR1";
	case SIGUSR2: return "SIGUSR2";
	case SIGALRM: return "SIGALRM";
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

/* The descriptors dlock was started with, which the command inherits;
 * every other one is dlock's own (libcurl's sockets) and closes on exec,
 * so the command can neither read dlock's connection to dlockd nor keep
 * it open. */
static int *inherited_fds;	/* sorted, as /proc lists them (ascending) */
static size_t n_inherited;
/* and how SIGPIPE was handled, before dlock ignored it */
static struct sigaction inherited_pipe;

static bool fd_inherited(int fd)
{
	for (size_t i = 0; i < n_inherited; i++)
		if (inherited_fds[i] == fd)
			return true;
	return false;
}

/* Call fn on each open descriptor above 2. */
static void each_fd(void (*fn)(int fd))
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int self = d ? dirfd(d) : -1;

	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd > 2 && fd != self)
			fn(fd);
	}
	if (d)
		closedir(d);
}

static void note_inherited(int fd)
{
	int *grown = realloc(inherited_fds, (n_inherited + 1) * sizeof(*grown));

	if (!grown)
		return;		/* it will close on exec: a descriptor lost, no harm */
	inherited_fds = grown;
	inherited_fds[n_inherited++] = fd;
}

static void close_on_exec_unless_inherited(int fd)
{
	if (!fd_inherited(fd))
		fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

void run_note_inherited(void)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };

	/* a closed stdout or stderr is an error for dlock to report, not its
	 * death: the command gets SIGPIPE as it was */
	sigaction(SIGPIPE, &ign, &inherited_pipe);
	/* 0, 1 and 2 are the command's too: a closed one is opened on
	 * /dev/null, or dlock's own sockets would take its number */
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) < 0) {
			int null = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);

			if (null >= 0 && null != fd) {
				dup2(null, fd);
				close(null);
			}
		}
	}
	each_fd(note_inherited);
}

/* What dlock found at its start, for the command: the signal mask, and
 * how SIGCHLD and SIGPIPE were handled (dlock needs SIGCHLD delivered and
 * SIGPIPE ignored, but a caller that ignores either passes that on). */
struct inherited {
	sigset_t mask;
	struct sigaction chld, pipe;
};

/* Fork and exec argv in a group of its own with the lock in its
 * environment and what dlock inherited. -1 with *err set when it could
 * not be run. */
static pid_t spawn(const struct lease *l, char *const argv[], const struct inherited *in,
		   int *err)
{
	pid_t parent = getpid(), pid;
	int p[2], e = 0;
	char token[32], ttl[32];
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0) {
		*err = errno;
		return -1;
	}
	snprintf(token, sizeof(token), "%lld", l->fencing_token);
	snprintf(ttl, sizeof(ttl), "%lld", (long long)l->ttl_ms);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)	/* dlock died before the line above */
			_exit(EXIT_LOST);
		sigaction(SIGCHLD, &in->chld, NULL);
		sigaction(SIGPIPE, &in->pipe, NULL);
		sigprocmask(SIG_SETMASK, &in->mask, NULL);
		setenv("DLOCK_NAME", l->name, 1);
		setenv("DLOCK_KIND", lease_kind_name(l->kind), 1);
		if (lease_mode_name(l->kind))
			setenv("DLOCK_MODE", lease_mode_name(l->kind), 1);
		else
			unsetenv("DLOCK_MODE");
		setenv("DLOCK_OWNER", l->owner, 1);
		setenv("DLOCK_FENCING_TOKEN", token, 1);
		if (l->fencing_tokens) {	/* several names: each one's, and the session */
			setenv("DLOCK_FENCING_TOKENS", l->fencing_tokens, 1);
			setenv("DLOCK_SESSION", l->owner, 1);
		} else {
			unsetenv("DLOCK_FENCING_TOKENS");
			unsetenv("DLOCK_SESSION");
		}
		setenv("DLOCK_TTL_MS", ttl, 1);	/* a `dlock renew` inside keeps the lease */
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

/* The last moment to stop the command inside its lease with no renewal
 * confirmed: SIGTERM then leaves it the grace, and the SIGKILL after it
 * still comes the margin before the lease ends. */
static int64_t term_by(const struct supervisor *s)
{
	return s->l->end_ms - s->margin_ms - s->o->grace_ms;
}

/* When the SIGKILL is due once the SIGTERM was sent: the grace after it,
 * but never past the margin before the lease's end (which a renewal may
 * still move on while what the command left behind is being stopped). */
static int64_t kill_by(const struct supervisor *s)
{
	int64_t grace_end = s->term_sent + s->o->grace_ms, lease_end = s->l->end_ms - s->margin_ms;

	return grace_end < lease_end ? grace_end : lease_end;
}

/* SIGTERM to the group (now), and SIGKILL due at kill_by(). */
static void stop_group(struct supervisor *s, int64_t now)
{
	if (s->stopping)
		return;
	s->stopping = true;
	s->term_sent = now;
	kill(-s->pgid, SIGTERM);
}

/* The lease is gone, or can no longer be saved for the command: stop the
 * group (if that has not begun), renew nothing more, and say why. */
static void lose(struct supervisor *s, int64_t now, const char *why)
{
	int64_t kill_in;

	if (s->lost)
		return;
	s->lost = true;
	stop_group(s, now);
	if (s->renewing) {
		client_abort(s->l->client);
		s->renewing = false;
	}
	kill_in = kill_by(s) - now;
	lease_say(s->l, "%s: stopping the command (SIGTERM, SIGKILL after %lld ms)", why,
		  (long long)(kill_in > 0 ? kill_in : 0));
}

/* term_by() is reached (or past, after a stop): the lease, counted from
 * the last renewal dlockd confirmed, ends within the grace and the margin. */
static void lose_unrenewed(struct supervisor *s, int64_t now, const char *what)
{
	int64_t left = s->l->end_ms - now;
	char why[200];

	snprintf(why, sizeof(why), "%s, and the lease %s %lld ms%s", what,
		 left > 0 ? "ends in" : "ended", (long long)(left > 0 ? left : -left),
		 left > 0 ? "" : " ago");
	lose(s, now, why);
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
		s->next_renew = s->renew_again ? s->renew_sent + NUDGE_GAP_MS
					       : s->renew_sent + s->renew_every;
		s->renew_again = false;
	} else if (out == LEASE_LOST) {
		lose(s, now, "the lease is lost (dlockd says it is not held)");
	} else {
		/* try again soon, a few times before the stop must begin */
		int64_t in = (term_by(s) - now) / 4;

		s->next_renew = now + (in < 100 ? 100 : in > 1000 ? 1000 : in);
	}
}

/* The lock's state changed (the watch): renew now, or once the renewal in
 * flight is answered (it may have been sent before the change), at most
 * every NUDGE_GAP_MS; its answer says whether the lease is gone. */
static void nudge(struct supervisor *s)
{
	int64_t soonest = s->renew_sent + NUDGE_GAP_MS;

	if (s->lost)
		return;
	if (s->renewing)
		s->renew_again = true;
	else if (s->next_renew > soonest)
		s->next_renew = soonest;
}

/* Ctrl-Z: the command stops with dlock (SIGSTOP: one that ignores
 * SIGTSTP must not run on with nobody renewing its lease), and goes on
 * with it -- unless the time to stop it inside its lease came meanwhile:
 * then it is stopped for good, SIGKILL still due by the margin before the
 * lease's end, so at once if that is past too (SIGCONT then lets SIGTERM
 * in, or nothing). */
static void suspend(struct supervisor *s)
{
	int64_t now;
	sigset_t pending;

	if (group_alive(s->pgid))
		kill(-s->pgid, SIGSTOP);
	/* a SIGCONT sent since the stop request undoes it: stopping now would
	 * wait for another */
	sigpending(&pending);
	if (!sigismember(&pending, SIGCONT))
		raise(SIGSTOP);
	/* continued (fg, SIGCONT) */
	now = mono_ms();
	if (!s->lost && now >= term_by(s))
		lose_unrenewed(s, now, "dlock was stopped with no renewal");
	else if (!s->lost && !s->renewing)
		s->next_renew = now;	/* renew at once: time has passed */
	if (s->stopping && !s->killed && now >= kill_by(s)) {
		s->killed = true;
		kill(-s->pgid, SIGKILL);
	}
	if (group_alive(s->pgid))
		kill(-s->pgid, SIGCONT);
}

/* Wait for the next event (at most until the nearest deadline) and
 * handle it. */
static void step(struct supervisor *s)
{
	int64_t now = mono_ms(), wait = 1000;
	bool stop = false, cont = false;
	int sig;

	if (!s->lost && term_by(s) - now < wait)
		wait = term_by(s) - now;
	if (!s->lost && !s->renewing && s->next_renew - now < wait)
		wait = s->next_renew - now;
	if (s->stopping && !s->killed && kill_by(s) - now < wait)
		wait = kill_by(s) - now;
	if (wait < 0)
		wait = 0;
	if (s->renewing) {
		if (client_poll(s->l->client, s->sigfd, (int)wait))
			renewal_done(s, mono_ms());
	} else {
		struct pollfd p = { .fd = s->sigfd, .events = POLLIN };

		poll(&p, 1, (int)wait);
	}
	/* all that came, then act: a SIGCONT read with a stop request was
	 * sent after it (a stop signal discards a pending SIGCONT), so the
	 * stop is undone already */
	while ((sig = next_signal(s->sigfd)) > 0) {
		if (sig == SIGCHLD)
			reap(s);
		else if (sig == WATCH_SIGNAL)
			nudge(s);
		else if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
			stop = true;
		else if (sig == SIGCONT)
			cont = true;
		else if (group_alive(s->pgid))
			kill(-s->pgid, sig);
	}
	if (stop && !cont)
		suspend(s);
	else if (cont && group_alive(s->pgid))
		kill(-s->pgid, SIGCONT);
}

static int supervise(struct supervisor *s)
{
	for (;;) {
		int64_t now = mono_ms();

		if (!s->lost && now >= term_by(s))
			lose_unrenewed(s, now, "no renewal that dlockd confirmed");
		if (s->stopping && !s->killed && now >= kill_by(s)) {
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
			int64_t left = term_by(s) - now;	/* > 0: not lost */

			s->renewing = true;
			s->renew_sent = now;
			lease_renew_start(s->l, (long)(left < s->renew_every ? left
							  : s->renew_every));
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

/* The watch's signal is read from the signalfd while blocked. Its
 * default action ends the process, so it gets a handler that does
 * nothing, should one be delivered after the old mask came back. */
static void on_watch_signal(int sig)
{
	(void)sig;
}

/* The watch's signals still pending once it is stopped: taken, so that
 * none is delivered when the old mask comes back (a run of a semaphore
 * that others churned once exited by signal, with no word said). */
static void drain_watch_signals(void)
{
	const struct timespec now = { 0, 0 };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, WATCH_SIGNAL);
	while (sigtimedwait(&set, NULL, &now) > 0)
		;
}

/* ----- dlock run ----- */

/* The signals dlock takes over: forwarded to the command's group, or
 * ending a wait. */
static void forwarded_signals(sigset_t *set)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM };

	sigemptyset(set);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(set, sigs[i]);
}

int run_signalfd(sigset_t *old)
{
	sigset_t set;
	int fd;

	forwarded_signals(&set);
	sigprocmask(SIG_BLOCK, &set, old);
	fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		perror("dlock: signalfd");
	return fd;
}

/* Once the command runs, the signalfd also hears its death (SIGCHLD) and
 * job control: a stop of dlock must stop the command too. */
static void take_job_control(int sigfd)
{
	static const int sigs[] = { SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT };
	sigset_t set;

	forwarded_signals(&set);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&set, sigs[i]);
	sigaddset(&set, WATCH_SIGNAL);
	sigaction(WATCH_SIGNAL, &(struct sigaction){ .sa_handler = on_watch_signal }, NULL);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signalfd(sigfd, &set, 0);
}

int run_signal_taken(int sigfd)
{
	int sig = next_signal(sigfd);

	return sig > 0 ? sig : SIGTERM;
}

int run_command(struct lease *l, const struct run_opts *o, char *const argv[])
{
	struct supervisor s = { .l = l, .o = o };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	struct inherited in;
	int status, err = 0, sig;
	enum lease_outcome out;

	/* a SIGCHLD ignored by whoever started dlock would reap the command
	 * before dlock could learn how it ended */
	sigaction(SIGCHLD, &dfl, &in.chld);
	in.pipe = inherited_pipe;
	s.sigfd = run_signalfd(&in.mask);
	if (s.sigfd < 0)
		return EXIT_UNAVAILABLE;
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	out = lease_acquire(l, o->wait_ms, s.sigfd);
	if (out == LEASE_INTERRUPTED) {
		sig = run_signal_taken(s.sigfd);
		lease_say(l, "%s while waiting: gave up", run_signal_name(sig));
		status = 128 + sig;
		goto out;
	}
	if (out != LEASE_OK) {
		status = lease_exit_code(out, o->conflict_exit);
		goto out;
	}

	s.margin_ms = l->ttl_ms * MARGIN_PERCENT / 100 + MARGIN_MS;
	s.renew_every = (l->ttl_ms - o->grace_ms - s.margin_ms) / 3;
	/* counted from the lease's start, as every renewal after it */
	s.next_renew = l->end_ms - l->ttl_ms + s.renew_every;
	if (mono_ms() >= term_by(&s)) {
		/* the grant (and the renewal after a long wait) took so long
		 * that the command could not run inside what is left */
		lease_say(l, "granted too late to run the command inside its lease (%lld ms "
			  "left): not run", (long long)(l->end_ms - mono_ms()));
		s.lost = true;
		status = EXIT_LOST;
		goto release;
	}
	take_job_control(s.sigfd);
	each_fd(close_on_exec_unless_inherited);
	s.pgid = spawn(l, argv, &in, &err);
	if (s.pgid < 0) {
		lease_say(l, "cannot run '%s': %s", argv[0], strerror(err));
		/* dlock runs no shell: a shell command given as one word is
		 * looked up as a file named after all of it */
		if (err == ENOENT && strpbrk(argv[0], " \t;&|<>$"))
			lease_say(l, "a shell command? dlock runs none: write "
				  "dlock run %s -- sh -c '%s' (or -c '%s')", l->name, argv[0],
				  argv[0]);
		status = err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
	} else {
		/* started after the fork: the child copies one thread */
		struct lock_watch *w = l->ops ? NULL : lock_watch_start(l, WATCH_SIGNAL);

		status = supervise(&s);
		lock_watch_stop(w);
		drain_watch_signals();
	}
release:
	/* a lost lease is gone (or ends by itself): one try, no patience */
	lease_release(l, false, s.lost, !s.lost);
out:
	close(s.sigfd);
	sigprocmask(SIG_SETMASK, &in.mask, NULL);
	sigaction(SIGCHLD, &in.chld, NULL);
	return status;
}
