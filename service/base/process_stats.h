/* process_stats.h -- what Prometheus' process_* metrics report about this
 * process, read from /proc/self (Linux). */
#ifndef DLOCKD_PROCESS_STATS_H
#define DLOCKD_PROCESS_STATS_H

#include <stdbool.h>

struct process_stats {
	double cpu_seconds;		/* user and system time */
	double resident_bytes;
	double virtual_bytes;
	double start_time_seconds;	/* since the Unix epoch */
	double open_fds;
	double max_fds;			/* the soft limit, RLIMIT_NOFILE */
	bool have_stat;			/* /proc/self/stat could be read */
	bool have_fds;			/* /proc/self/fd could be read */
};

/* Fill st with what can be read now; fields that cannot are not set (the
 * have_ flags say which). */
void process_stats_read(struct process_stats *st);

#endif
