/* test_loop.c -- the event loop's thread check (LOOP_ASSERT_THREAD): any
 * thread may set a loop up before it runs and tear it down after; while
 * loop_run() runs it, its own thread may touch it (a posted function
 * arms a timer) and another thread that does is stopped at once with the
 * function named, in a child process so the abort is seen from outside.
 * And a parked descriptor (loop_park): silent, re-armed by its next watch
 * with one epoll_ctl, added anew when its number was closed and reused,
 * out of the set at its first event. */
#include "unit.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "service/base/loop.c"

static void nothing(struct loop *l, struct loop_timer *t)
{
	(void)l;
	(void)t;
}

static void *run(void *arg)
{
	loop_run(arg);
	return NULL;
}

/* Posted to the loop: arm and disarm a timer on its own thread. */
static void arm_here(struct loop *l, void *data)
{
	struct loop_timer *t = data;

	loop_timer_set(l, t, now_ms() + 60000);
	loop_timer_stop(l, t);
	loop_stop(l);
}

static void test_loop__own_thread_and_set_up_may_touch_it(void **state)
{
	struct loop *l = loop_new();
	struct loop_timer t;
	pthread_t th;

	(void)state;
	assert_non_null(l);
	loop_timer_init(&t, nothing);
	loop_timer_set(l, &t, now_ms() + 60000);	/* set-up: not running yet */
	loop_timer_stop(l, &t);
	assert_int_equal(pthread_create(&th, NULL, run, l), 0);
	assert_int_equal(loop_post(l, arm_here, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	loop_timer_set(l, &t, now_ms() + 60000);	/* tear-down: run returned */
	loop_timer_stop(l, &t);
	loop_free(l);
}

static void test_loop__another_thread_is_stopped_while_it_runs(void **state)
{
	int status = 0;
	pid_t pid;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct loop *l = loop_new();
		struct loop_timer t;
		pthread_t th;

		loop_timer_init(&t, nothing);
		if (!l || pthread_create(&th, NULL, run, l) != 0)
			_exit(3);
		while (!__atomic_load_n(&l->running, __ATOMIC_RELAXED))
			usleep(1000);
		loop_timer_set(l, &t, now_ms() + 60000);	/* not its thread */
		_exit(0);	/* not reached */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

/* ----- Parked descriptors ----- */

static int hangups;

static void count_hangup(struct loop *l, int fd, unsigned events, void *data)
{
	(void)l;
	(void)fd;
	(void)data;
	if (events & (LOOP_HANGUP | LOOP_ERROR))
		hangups++;
}

/* Whether fd is in l's epoll set: a MOD of it (to what the table says
 * it watches, as it was) succeeds. */
static bool in_set(struct loop *l, int fd)
{
	const struct fd_watch *w = &l->watches[fd];
	struct epoll_event ev = {
		.events = epoll_mask(w->events ? w->events : LOOP_HANGUP),
		.data.u64 = (uint64_t)(uint32_t)fd | (uint64_t)w->gen << 32,
	};

	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) == 0 || errno != ENOENT;
}

static void turns(struct loop *l, int n)
{
	while (n--)
		loop_turn(l, 0);
}

/* A new loop whose one end of a new socket pair, sv[0], was watched for a
 * hang-up and then parked. */
static struct loop *parked_pair(int sv[2])
{
	struct loop *l = loop_new();

	assert_non_null(l);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	hangups = 0;
	assert_int_equal(loop_watch(l, sv[0], LOOP_HANGUP, count_hangup, NULL), 0);
	loop_park(l, sv[0]);
	return l;
}

static void test_loop__a_parked_fd_stays_in_the_set_and_says_nothing(void **state)
{
	int sv[2];
	struct loop *l = parked_pair(sv);

	(void)state;
	assert_true(l->watches[sv[0]].parked);
	assert_true(in_set(l, sv[0]));	/* no EPOLL_CTL_DEL was made */
	/* watched again: re-armed, and told of a hang-up as before */
	assert_int_equal(loop_watch(l, sv[0], LOOP_HANGUP, count_hangup, NULL), 0);
	assert_false(l->watches[sv[0]].parked);
	close(sv[1]);
	turns(l, 1);
	assert_int_equal(hangups, 1);
	loop_unwatch(l, sv[0]);
	assert_false(in_set(l, sv[0]));
	close(sv[0]);
	loop_free(l);
}

static void test_loop__a_parked_fds_first_event_takes_it_out_of_the_set(void **state)
{
	int sv[2];
	struct loop *l = parked_pair(sv);

	(void)state;
	close(sv[1]);		/* level-triggered: it would report every turn */
	turns(l, 3);
	assert_int_equal(hangups, 0);	/* nobody is called back */
	assert_false(l->watches[sv[0]].parked);
	assert_false(in_set(l, sv[0]));
	/* and a watch after that adds it again */
	assert_int_equal(loop_watch(l, sv[0], LOOP_HANGUP, count_hangup, NULL), 0);
	turns(l, 1);
	assert_int_equal(hangups, 1);
	loop_unwatch(l, sv[0]);
	close(sv[0]);
	loop_free(l);
}

static void test_loop__a_parked_number_closed_and_reused_is_added_anew(void **state)
{
	int sv[2], again[2];
	struct loop *l = parked_pair(sv);
	uint32_t gen;

	(void)state;
	gen = l->watches[sv[0]].gen;
	close(sv[0]);		/* it leaves the set with its file */
	close(sv[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, again), 0);
	assert_int_equal(again[0], sv[0]);	/* the lowest number free */
	assert_false(in_set(l, again[0]));
	assert_int_equal(loop_watch(l, again[0], LOOP_HANGUP, count_hangup, NULL), 0);
	assert_true(in_set(l, again[0]));
	assert_true(l->watches[again[0]].gen != gen);
	close(again[1]);
	turns(l, 1);
	assert_int_equal(hangups, 1);	/* the new socket is watched */
	loop_unwatch(l, again[0]);
	close(again[0]);
	loop_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop__own_thread_and_set_up_may_touch_it),
		cmocka_unit_test(test_loop__another_thread_is_stopped_while_it_runs),
		cmocka_unit_test(test_loop__a_parked_fd_stays_in_the_set_and_says_nothing),
		cmocka_unit_test(test_loop__a_parked_fds_first_event_takes_it_out_of_the_set),
		cmocka_unit_test(test_loop__a_parked_number_closed_and_reused_is_added_anew),
	};

	return cmocka_run_group_tests_name("loop", tests, NULL, NULL);
}
