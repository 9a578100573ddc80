/* loop.c -- the event loop (loop.h): one epoll set, a table of watched
 * descriptors indexed by number, a heap of timers, before-sleep hooks,
 * deferred tasks, and a mailbox (a mutex-guarded list and an eventfd) for
 * work posted from other threads.
 *
 * Each epoll registration carries the descriptor's number and a
 * generation, bumped whenever a number is watched anew: an event that a
 * descriptor reported before it was unwatched (and perhaps its number
 * reused by a new one in the same turn) is recognised and dropped, never
 * handed to the new owner. */
#include "service/base/loop.h"

#include "service/base/log.h"
#include "service/base/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_EVENTS 64

struct fd_watch {
	loop_io_fn *fn;		/* NULL: not watched */
	void *data;
	unsigned events;
	uint32_t gen;
	bool parked;		/* fn NULL, still in the epoll set (loop_park) */
};

struct hook {
	loop_fn *fn;
	void *data;
};

struct message {
	struct list_node link;		/* in the mailbox */
	loop_fn *fn;
	void *data;
};

struct loop {
	int epfd;
	int mailbox_fd;			/* eventfd: something was posted */
	struct fd_watch *watches;		/* indexed by descriptor */
	size_t nwatches;
	struct heap timers;
	struct hook *hooks;
	size_t nhooks;
	struct list_node tasks;		/* struct loop_task, deferred, in order */
	bool stop;			/* atomic: loop_stop() */
	bool running;			/* atomic: loop_run() is running it */

	pthread_mutex_t mailbox_lock;	/* guards the two below */
	struct list_node posted;	/* struct message, in order */
	bool closed;			/* loop_run() returned: refuse posts */
};

/* The loop this thread runs (set by loop_run and loop_turn), or NULL. */
static __thread struct loop *thread_loop;

void loop_check_thread(const struct loop *l, const char *fn)
{
	if (thread_loop == l || !__atomic_load_n(&l->running, __ATOMIC_RELAXED))
		return;
	log_error("%s: called on a thread that does not run its event loop", fn);
	abort();
}

/* ----- Descriptors ----- */

static uint32_t epoll_mask(unsigned events)
{
	return (events & LOOP_READ ? EPOLLIN : 0) | (events & LOOP_WRITE ? EPOLLOUT : 0) |
	       (events & LOOP_HANGUP ? EPOLLRDHUP : 0);
}

static int epoll_set(struct loop *l, int op, int fd, struct fd_watch *w, unsigned events)
{
	struct epoll_event ev = { 0 };

	ev.events = epoll_mask(events);
	if (op == EPOLL_CTL_ADD && (events & LOOP_EXCLUSIVE))
		ev.events |= EPOLLEXCLUSIVE;
	ev.data.u64 = (uint64_t)(uint32_t)fd | (uint64_t)w->gen << 32;
	return epoll_ctl(l->epfd, op, fd, &ev);
}

int loop_watch(struct loop *l, int fd, unsigned events, loop_io_fn *fn, void *data)
{
	struct fd_watch *w;
	int rc;

	LOOP_ASSERT_THREAD(l);
	if (fd < 0)
		return -1;
	if ((size_t)fd >= l->nwatches) {
		size_t n = l->nwatches ? l->nwatches : 64;

		while (n <= (size_t)fd)
			n *= 2;
		l->watches = xrealloc(l->watches, n * sizeof(*l->watches));
		memset(l->watches + l->nwatches, 0, (n - l->nwatches) * sizeof(*l->watches));
		l->nwatches = n;
	}
	w = &l->watches[fd];
	if (w->fn && w->events == events) {
		w->fn = fn;
		w->data = data;
		return 0;
	}
	if (w->fn) {
		rc = epoll_set(l, EPOLL_CTL_MOD, fd, w, events);
	} else {
		/* A parked fd is re-armed (a new generation: what it reported
		 * while parked is not this watch's); unless its number was
		 * closed, and left the set, since: then it is added anew. */
		w->gen++;
		rc = -1;
		if (w->parked && (rc = epoll_set(l, EPOLL_CTL_MOD, fd, w, events)) < 0 &&
		    errno != ENOENT)
			epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		w->parked = false;
		if (rc < 0)
			rc = epoll_set(l, EPOLL_CTL_ADD, fd, w, events);
	}
	if (rc < 0) {
		log_error("epoll_ctl(%d): %s", fd, strerror(errno));
		return -1;
	}
	w->fn = fn;
	w->data = data;
	w->events = events;
	return 0;
}

void loop_unwatch(struct loop *l, int fd)
{
	struct fd_watch *w;

	LOOP_ASSERT_THREAD(l);
	if (fd < 0 || (size_t)fd >= l->nwatches)
		return;
	w = &l->watches[fd];
	if (!w->fn && !w->parked)
		return;
	/* ENOENT when fd was closed already (it left the set with it) */
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	w->fn = NULL;
	w->data = NULL;
	w->events = 0;
	w->parked = false;
}

void loop_park(struct loop *l, int fd)
{
	struct fd_watch *w;

	LOOP_ASSERT_THREAD(l);
	if (fd < 0 || (size_t)fd >= l->nwatches || !l->watches[fd].fn)
		return;
	w = &l->watches[fd];
	w->fn = NULL;
	w->data = NULL;
	w->parked = true;
}

static void dispatch_event(struct loop *l, const struct epoll_event *ev)
{
	int fd = (int)(uint32_t)ev->data.u64;
	uint32_t gen = (uint32_t)(ev->data.u64 >> 32);
	struct fd_watch *w;
	unsigned got = 0;

	if ((size_t)fd >= l->nwatches)
		return;
	w = &l->watches[fd];
	if (w->gen != gen)
		return;		/* unwatched during this turn */
	if (!w->fn) {
		/* parked (or unwatched this turn): the first thing it reports
		 * takes it out of the set, so that it is not reported again */
		if (w->parked) {
			epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
			w->parked = false;
			w->events = 0;
		}
		return;
	}
	if (ev->events & EPOLLIN)
		got |= LOOP_READ;
	if (ev->events & EPOLLOUT)
		got |= LOOP_WRITE;
	if (ev->events & EPOLLRDHUP)
		got |= LOOP_HANGUP;
	if (ev->events & (EPOLLERR | EPOLLHUP))
		got |= LOOP_ERROR | (w->events & LOOP_READ);
	w->fn(l, fd, got, w->data);
}

/* ----- Timers ----- */

void loop_timer_init(struct loop_timer *t, loop_timer_fn *fn)
{
	heap_node_init(&t->node);
	t->fn = fn;
}

void loop_timer_set(struct loop *l, struct loop_timer *t, int64_t at_ms)
{
	LOOP_ASSERT_THREAD(l);
	heap_set(&l->timers, &t->node, at_ms);
}

void loop_timer_stop(struct loop *l, struct loop_timer *t)
{
	LOOP_ASSERT_THREAD(l);
	heap_remove(&l->timers, &t->node);
}

static void run_timers(struct loop *l)
{
	int64_t now = now_ms();
	struct heap_node *top;

	while ((top = heap_top(&l->timers)) && top->at_ms <= now) {
		struct loop_timer *t = container_of(top, struct loop_timer, node);

		heap_remove(&l->timers, top);
		t->fn(l, t);
	}
}

/* ----- Hooks and deferred tasks ----- */

void loop_before_sleep(struct loop *l, loop_fn *fn, void *data)
{
	LOOP_ASSERT_THREAD(l);
	l->hooks = xrealloc(l->hooks, (l->nhooks + 1) * sizeof(*l->hooks));
	l->hooks[l->nhooks++] = (struct hook){ fn, data };
}

void loop_task_init(struct loop_task *t, loop_fn *fn, void *data)
{
	*t = (struct loop_task){ .fn = fn, .data = data };
	list_node_init(&t->link);
}

void loop_defer(struct loop *l, struct loop_task *t)
{
	LOOP_ASSERT_THREAD(l);
	if (!list_linked(&t->link))
		list_append(&l->tasks, &t->link);
}

void loop_cancel(struct loop *l, struct loop_task *t)
{
	LOOP_ASSERT_THREAD(l);
	if (list_linked(&t->link))
		list_remove(&t->link);
}

static void run_deferred(struct loop *l)
{
	struct list_node *n;

	while ((n = list_pop(&l->tasks))) {
		struct loop_task *t = list_entry(n, struct loop_task, link);

		t->fn(l, t->data);
	}
}

/* ----- The mailbox ----- */

int loop_post(struct loop *l, loop_fn *fn, void *data)
{
	struct message *m = xmalloc(sizeof(*m));
	const uint64_t one = 1;
	bool first;

	m->fn = fn;
	m->data = data;
	pthread_mutex_lock(&l->mailbox_lock);
	if (l->closed) {
		pthread_mutex_unlock(&l->mailbox_lock);
		free(m);
		return -1;
	}
	first = list_empty(&l->posted);
	list_append(&l->posted, &m->link);
	pthread_mutex_unlock(&l->mailbox_lock);
	/* the loop drains everything when the eventfd turns readable: one
	 * write per batch is enough */
	if (first && write(l->mailbox_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("loop mailbox: %s", strerror(errno));
	return 0;
}

/* Run what was posted, in order. */
static void drain_mailbox(struct loop *l)
{
	struct list_node batch, *n;
	uint64_t junk;

	if (read(l->mailbox_fd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
		log_warn("loop mailbox: %s", strerror(errno));
	list_init(&batch);
	pthread_mutex_lock(&l->mailbox_lock);
	list_splice(&batch, &l->posted);
	pthread_mutex_unlock(&l->mailbox_lock);
	while ((n = list_pop(&batch))) {
		struct message *m = list_entry(n, struct message, link);

		m->fn(l, m->data);
		free(m);
	}
}

static void on_mailbox(struct loop *l, int fd, unsigned events, void *data)
{
	(void)fd;
	(void)events;
	(void)data;
	drain_mailbox(l);
}

/* ----- Running ----- */

/* How long epoll_wait may sleep: until the next timer, at most max_ms. */
static int sleep_ms(struct loop *l, int max_ms)
{
	struct heap_node *top = heap_top(&l->timers);
	int64_t left;

	if (!list_empty(&l->tasks))
		return 0;
	if (!top)
		return max_ms;
	left = top->at_ms - now_ms();
	if (left < 0)
		left = 0;
	if (max_ms >= 0 && left > max_ms)
		left = max_ms;
	return left > 60000 ? 60000 : (int)left;
}

void loop_turn(struct loop *l, int max_wait_ms)
{
	struct epoll_event evs[MAX_EVENTS];
	int n;

	thread_loop = l;
	n = epoll_wait(l->epfd, evs, MAX_EVENTS, sleep_ms(l, max_wait_ms));
	if (n < 0 && errno != EINTR)
		log_error("epoll_wait: %s", strerror(errno));
	for (int i = 0; i < n; i++)
		dispatch_event(l, &evs[i]);
	run_timers(l);
	for (size_t i = 0; i < l->nhooks; i++)
		l->hooks[i].fn(l, l->hooks[i].data);
	run_deferred(l);
}

void loop_run(struct loop *l)
{
	thread_loop = l;
	__atomic_store_n(&l->running, true, __ATOMIC_RELAXED);
	while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE))
		loop_turn(l, -1);
	pthread_mutex_lock(&l->mailbox_lock);
	l->closed = true;
	pthread_mutex_unlock(&l->mailbox_lock);
	drain_mailbox(l);
	run_deferred(l);
	__atomic_store_n(&l->running, false, __ATOMIC_RELAXED);
}

void loop_stop(struct loop *l)
{
	const uint64_t one = 1;

	__atomic_store_n(&l->stop, true, __ATOMIC_RELEASE);
	if (write(l->mailbox_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("loop mailbox: %s", strerror(errno));
}

/* ----- Set-up ----- */

struct loop *loop_new(void)
{
	struct loop *l = xcalloc(1, sizeof(*l));

	pthread_mutex_init(&l->mailbox_lock, NULL);
	heap_init(&l->timers);
	list_init(&l->tasks);
	list_init(&l->posted);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->mailbox_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->epfd < 0 || l->mailbox_fd < 0 ||
	    loop_watch(l, l->mailbox_fd, LOOP_READ, on_mailbox, NULL) < 0) {
		log_error("cannot make an event loop: %s", strerror(errno));
		loop_free(l);
		return NULL;
	}
	return l;
}

void loop_free(struct loop *l)
{
	struct list_node *n;

	if (!l)
		return;
	while ((n = list_pop(&l->posted)))
		free(list_entry(n, struct message, link));
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->mailbox_fd >= 0)
		close(l->mailbox_fd);
	heap_release(&l->timers);
	free(l->watches);
	free(l->hooks);
	pthread_mutex_destroy(&l->mailbox_lock);
	if (thread_loop == l)
		thread_loop = NULL;
	free(l);
}
