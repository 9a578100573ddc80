/* loop.h -- an event loop in the shape of Redis' ae.c: file descriptors
 * watched with a callback each, timers, hooks run before the loop sleeps,
 * and a mailbox through which other threads hand work to the loop. It
 * knows neither HTTP nor Redis.
 *
 * One thread runs a loop (loop_run); every call below is made on that
 * thread, except loop_post() and loop_stop(), which any thread may make.
 * One turn: wait in epoll_wait (no longer than the next timer, not at all
 * when work is deferred), call the callbacks of the ready descriptors, fire
 * the due timers, then run the before-sleep hooks (in the order added) and
 * the deferred tasks (in the order deferred, including those deferred
 * meanwhile) until none is left.
 *
 * The mailbox's mutex is a leaf: loop_post() takes it for a list push and
 * calls nothing under it; posted functions run on the loop without it. */
#ifndef DLOCKD_LOOP_H
#define DLOCKD_LOOP_H

#include "service/base/heap.h"
#include "service/base/list.h"

#include <stdbool.h>
#include <stdint.h>

struct loop;

/* What a descriptor is watched for, and what it reported. */
enum loop_events {
	LOOP_READ = 1 << 0,		/* readable (or EOF, an error) */
	LOOP_WRITE = 1 << 1,		/* writable */
	LOOP_HANGUP = 1 << 2,		/* the peer hung up or half-closed (EPOLLRDHUP) */
	LOOP_EXCLUSIVE = 1 << 3,	/* watch only: wake one of the loops watching
					 * fd, not all (EPOLLEXCLUSIVE; set when first
					 * watched, never changed) */
	LOOP_ERROR = 1 << 4,		/* reported only: EPOLLERR or EPOLLHUP */
};

typedef void loop_io_fn(struct loop *l, int fd, unsigned events, void *data);
typedef void loop_fn(struct loop *l, void *data);

struct loop_timer;
typedef void loop_timer_fn(struct loop *l, struct loop_timer *t);

/* A timer lives in its owner's struct (no allocation); fired once per
 * loop_timer_set(). */
struct loop_timer {
	struct heap_node node;
	loop_timer_fn *fn;
};

/* A task run once before the loop sleeps next; lives in its owner's struct. */
struct loop_task {
	struct list_node link;	/* in the loop's deferred tasks while queued */
	loop_fn *fn;
	void *data;
};

/* A loop, or NULL (and a log line) if the kernel refuses an epoll set. */
struct loop *loop_new(void);
/* Free l after loop_run() returned (or before it ran); the descriptors
 * still watched are not closed, messages still posted are dropped. */
void loop_free(struct loop *l);

/* Watch fd for events (LOOP_READ | LOOP_WRITE | LOOP_HANGUP, optionally
 * LOOP_EXCLUSIVE), calling fn(l, fd, reported, data) when it reports one;
 * called again for a watched fd, it changes the events and the callback.
 * 0, or -1 (logged) if the kernel refuses. */
int loop_watch(struct loop *l, int fd, unsigned events, loop_io_fn *fn, void *data);
/* Stop watching fd; call it before closing fd. Events fd reported in the
 * current turn and not yet handled are dropped. */
void loop_unwatch(struct loop *l, int fd);
/* Stop calling back for fd, but leave it in the epoll set: for an fd
 * watched again and again (a client's connection, while it waits), one
 * system call less each time. Its next loop_watch re-arms it; if fd was
 * closed meanwhile (it left the set with it: another may have its number
 * now) it is added anew. The first event it reports while parked takes it
 * out of the set. Events it reported in the current turn are dropped. Only
 * for an fd closed by close(2) alone, never dup(2)ed: a copy keeps it in
 * the set. */
void loop_park(struct loop *l, int fd);

void loop_timer_init(struct loop_timer *t, loop_timer_fn *fn);
/* Fire t at at_ms (now_ms() clock), or move it there if it is armed. */
void loop_timer_set(struct loop *l, struct loop_timer *t, int64_t at_ms);
/* Disarm t; harmless when it is not armed. */
void loop_timer_stop(struct loop *l, struct loop_timer *t);
static inline bool loop_timer_armed(const struct loop_timer *t)
{
	return heap_armed(&t->node);
}

/* Run fn(l, data) in every turn before the loop sleeps, in the order added. */
void loop_before_sleep(struct loop *l, loop_fn *fn, void *data);

void loop_task_init(struct loop_task *t, loop_fn *fn, void *data);
/* Run t once before the loop sleeps next (after the before-sleep hooks);
 * a task already deferred stays where it is in the queue. */
void loop_defer(struct loop *l, struct loop_task *t);
/* Take t back out of the queue, if it is there. */
void loop_cancel(struct loop *l, struct loop_task *t);

/* From any thread: run fn(l, data) on l's thread, soon, in the order
 * posted (after the current turn's callbacks when called from l's own
 * thread). Never waits for l. 0, or -1 once loop_run() has returned (fn
 * will not run: the caller still owns data). */
int loop_post(struct loop *l, loop_fn *fn, void *data);

/* Run turns until loop_stop(), then run what was posted meanwhile; posts
 * after that are refused. */
void loop_run(struct loop *l);
/* One turn, sleeping at most max_wait_ms (-1: until something happens);
 * for loops that stop on a condition of their own, and for tests. */
void loop_turn(struct loop *l, int max_wait_ms);
/* From any thread: make loop_run() return after the current turn. */
void loop_stop(struct loop *l);
/* Abort, naming fn, unless the calling thread may touch l: the thread that
 * runs it, or any thread while loop_run() is not running it (set-up
 * before, tear-down after). The loop's own calls above check it, and so
 * do the entry points of the modules that live on one loop (a
 * connection, the waiters, the fair-queue refresher): a call from the
 * wrong thread is a race that would corrupt them quietly. On in every
 * build: a thread-local read and a compare. */
void loop_check_thread(const struct loop *l, const char *fn);
#define LOOP_ASSERT_THREAD(l) loop_check_thread((l), __func__)

#endif
