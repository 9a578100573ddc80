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

void dlock_start(struct proc *p, const char *base, const char *env, const char *tag, ...)
{
	const char *argv[32];
	char server[128];
	const char *envv[] = { server, env, NULL };
	int argc = 0;
	va_list ap;

	snprintf(server, sizeof(server), "DLOCK_SERVER=%s", base ? base : H_dlockd.base);
	argv[argc++] = dlock_binary();
	va_start(ap, tag);
	while (argc < 31 && (argv[argc] = va_arg(ap, const char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	proc_start(p, argv, envv, tag);
}

int dlock_wait(struct proc *p)
{
	if (!WAIT_FOR(proc_exited(p), 30000))
		proc_kill(p);
	return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}
