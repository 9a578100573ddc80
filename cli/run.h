/* run.h -- `dlock run`: a command run while holding a lock. */
#ifndef DLOCK_RUN_H
#define DLOCK_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "lease.h"

struct run_opts {
	int64_t wait_ms;	/* -1: until acquired */
	int64_t grace_ms;	/* SIGTERM to SIGKILL, both inside the lease: at
				 * most half of the lease (args_grace_fits) */
	int conflict_exit;	/* the status when not acquired within wait_ms */
};

/* Acquire l (its client, kind, name, owner and ttl set), run argv in a
 * process group of its own while renewing the lease, stop it inside the
 * lease if the lease cannot be kept, release, and return dlock's exit
 * status. Takes over SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD. */
int run_command(struct lease *l, const struct run_opts *o, char *const argv[]);

/* Block SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM
 * and return a signalfd of them (-1 on failure, said on stderr); *old
 * gets the mask before. */
int run_signalfd(sigset_t *old);
/* The signal waiting on sigfd (SIGTERM if none is). */
int run_signal_taken(int sigfd);
/* Remember the descriptors dlock was started with (opening /dev/null on a
 * closed 0, 1 or 2) and how SIGPIPE was handled, then ignore SIGPIPE:
 * `dlock run`'s command inherits those, not dlock's own. Call it first
 * thing. */
void run_note_inherited(void);
/* "SIGINT", ... */
const char *run_signal_name(int sig);

#endif
