/* watch.c -- the watch of a held lock for `dlock run` (watch.h).
 *
 * The thread chains GET <state>?index=I&wait_ms=N on a client of its own
 * (a client is one thread's), I the index it last saw, from the fencing
 * token of the grant; dlockd answers at once when the state is another
 * already, else when it changes (woken by Redis pub/sub) or at wait_ms.
 * A change is told to the supervisor by a signal its signalfd reads, and
 * the supervisor renews at once: the renewal's answer, not the watch's,
 * says whether the lease is gone. A lock that changes all the time (a
 * semaphore others churn) is asked at most every WATCH_GAP_MS. A dlockd
 * whose --max-wait-ms is lower (400) is asked for half as long, down to
 * 1 ms; one that takes no wait at all is not watched (the renewals are
 * what the lease rests on). A failure is tried again a second later.
 * lock_watch_stop() wakes the thread through an eventfd, which abandons
 * the request in flight. */
#include "watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define WATCH_WAIT_MS 60000
#define WATCH_RETRY_MS 1000
#define WATCH_SLACK_MS 5000	/* beyond wait_ms, for the answer to come */
#define WATCH_GAP_MS 100	/* between one request's sending and the next's */

struct lock_watch {
	pthread_t thread;
	struct client *client;
	int stop_fd;		/* an eventfd, written to stop */
	int signo;
	pid_t pid;
	long long index;
	char path[300];
};

/* Sleep ms, or until stopped: false then. */
static bool watch_pause(const struct lock_watch *w, int ms)
{
	struct pollfd p = { .fd = w->stop_fd, .events = POLLIN };

	return poll(&p, 1, ms) == 0;
}

static void *watch_main(void *arg)
{
	struct lock_watch *w = arg;
	int wait_ms = WATCH_WAIT_MS;

	for (;;) {
		char path[400];
		struct answer a;
		json_t *index;
		bool again = false;
		int64_t sent = mono_ms(), gap;

		snprintf(path, sizeof(path), "%s?index=%lld&wait_ms=%d", w->path, w->index,
			 wait_ms);
		if (!client_call(w->client, "GET", path, NULL, wait_ms + WATCH_SLACK_MS, w->stop_fd,
				 &a))
			return NULL;	/* stopped */
		index = json_object_get(a.json, "index");
		if (a.status == 200 && json_is_integer(index)) {
			if (json_is_true(json_object_get(a.json, "changed")))
				kill(w->pid, w->signo);
			w->index = json_integer_value(index);
			again = true;
		} else if (a.status == 400 && strstr(answer_message(&a), "wait_ms")) {
			if (wait_ms < 2) {	/* dlockd takes no wait */
				answer_release(&a);
				return NULL;
			}
			wait_ms /= 2;	/* dlockd's --max-wait-ms is lower */
			again = true;
		}
		answer_release(&a);
		gap = again ? sent + WATCH_GAP_MS - mono_ms() : WATCH_RETRY_MS;
		if (gap > 0 && !watch_pause(w, (int)gap))
			return NULL;
	}
}

struct lock_watch *lock_watch_start(const struct lease *l, int signo)
{
	struct lock_watch *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		goto fail;
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	w->client = client_clone(l->client);
	w->signo = signo;
	w->pid = getpid();
	w->index = l->fencing_token;
	lease_status_path(l, w->path, sizeof(w->path));
	if (w->stop_fd < 0 || !w->client)
		goto fail;
	err = pthread_create(&w->thread, NULL, watch_main, w);
	if (err == 0)
		return w;
	errno = err;
fail:
	lease_say(l, "cannot watch the lock (%s): a forced release is known at the next "
		  "renewal", strerror(errno ? errno : ENOMEM));
	if (w) {
		if (w->stop_fd >= 0)
			close(w->stop_fd);
		client_free(w->client);
		free(w);
	}
	return NULL;
}

void lock_watch_stop(struct lock_watch *w)
{
	if (!w)
		return;
	eventfd_write(w->stop_fd, 1);	/* cannot fail: a count of 1 */
	pthread_join(w->thread, NULL);
	close(w->stop_fd);
	client_free(w->client);
	free(w);
}
