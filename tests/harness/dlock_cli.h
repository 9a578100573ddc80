/* dlock_cli.h -- the dlock command-line client built beside the dlockd
 * under test, run as a process of the test (test_dlock.c,
 * test_dlock_sem.c). */
#ifndef DLOCKD_DLOCK_CLI_H
#define DLOCKD_DLOCK_CLI_H

#include "harness.h"

#include <stdarg.h>

/* The path of dlock: dlockd_binary()'s directory, dlock. */
const char *dlock_binary(void);
/* Start dlock ARGS... (NULL-terminated) against base (NULL: the suite's
 * dlockd, as DLOCK_SERVER) with env (one more "NAME=value", or NULL) in
 * its environment; tag names its output files. */
void dlock_start(struct proc *p, const char *base, const char *env, const char *tag, ...);
/* The same with the environment envv (NULL-terminated "NAME=value"s, at
 * most 7) and no DLOCK_SERVER of the harness's; args NULL-terminated. */
void dlock_start_va(struct proc *p, const char *const *envv, const char *tag, va_list args);
/* Wait for it to end (30 s at most, then it is killed); its exit code, or
 * -1. */
int dlock_wait(struct proc *p);
/* What it wrote to stderr, and to stdout (the first 4 KiB; each in a
 * buffer of its own that the next call overwrites). */
const char *dlock_err(struct proc *p);
const char *dlock_out(struct proc *p);

#endif
