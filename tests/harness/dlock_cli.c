/* dlock_cli.c -- dlock as a process of the test (see dlock_cli.h). */
#include "dlock_cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

const char *dlock_binary(void)
{
	static char path[512];
	const char *d = dlockd_binary();
	size_t len = strlen(d);

	snprintf(path, sizeof(path), "%.*sdlock", (int)(len >= 6 ? len - 6 : 0), d);
	return path;
}

void dlock_start_va(struct proc *p, const char *const *envv, const char *tag, va_list args)
{
	const char *argv[32];
	int argc = 0;

	argv[argc++] = dlock_binary();
	while (argc < 31 && (argv[argc] = va_arg(args, const char *)))
		argc++;
	argv[argc] = NULL;
	proc_start(p, argv, envv, tag);
}

void dlock_start(struct proc *p, const char *base, const char *env, const char *tag, ...)
{
	char server[128];
	const char *envv[] = { server, env, NULL };
	va_list ap;

	snprintf(server, sizeof(server), "DLOCK_SERVER=%s", base ? base : H_dlockd.base);
	va_start(ap, tag);
	dlock_start_va(p, envv, tag, ap);
	va_end(ap);
}

int dlock_wait(struct proc *p)
{
	if (!WAIT_FOR(proc_exited(p), 30000))
		proc_kill(p);
	return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

const char *dlock_err(struct proc *p)
{
	static char buf[4096];

	return file_read(p->err, buf, sizeof(buf));
}

const char *dlock_out(struct proc *p)
{
	static char buf[4096];

	return file_read(p->out, buf, sizeof(buf));
}
