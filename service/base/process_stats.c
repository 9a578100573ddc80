/* process_stats.c -- the process_* figures every Prometheus client library
 * exports (CPU time, memory, file descriptors, start time), read from
 * /proc/self/stat, /proc/self/fd and /proc/stat's btime, as the Go and
 * Python clients read them. */
#include "service/base/process_stats.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The boot time, seconds since the epoch (/proc/stat's btime); 0 unknown. */
static double boot_time(void)
{
	char line[256];
	double bt = 0;
	FILE *f = fopen("/proc/stat", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "btime ", 6)) {
			bt = strtod(line + 6, NULL);
			break;
		}
	fclose(f);
	return bt;
}

static void read_stat(struct process_stats *st)
{
	char buf[1024], *p;
	unsigned long utime, stime, vsize;
	unsigned long long start;
	long rss, tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	size_t n;
	FILE *f = fopen("/proc/self/stat", "re");

	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: skip to the last ')' */
	p = strrchr(buf, ')');
	if (!p || tick <= 0)
		return;
	/* fields 3.. of proc(5): state, then 10 numbers to utime (14) */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d "
			  "%*d %*d %llu %lu %ld", &utime, &stime, &start, &vsize, &rss) != 5)
		return;
	st->cpu_seconds = (double)(utime + stime) / (double)tick;
	st->start_time_seconds = boot_time() + (double)start / (double)tick;
	st->virtual_bytes = (double)vsize;
	st->resident_bytes = (double)rss * (double)page;
	st->have_stat = true;
}

static void read_fds(struct process_stats *st)
{
	struct rlimit rl;
	struct dirent *e;
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");

	if (d) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
		st->open_fds = n > 0 ? n - 1 : 0;	/* not the one reading it */
		st->have_fds = true;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		st->max_fds = rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur;
}

void process_stats_read(struct process_stats *st)
{
	memset(st, 0, sizeof(*st));
	read_stat(st);
	read_fds(st);
}
