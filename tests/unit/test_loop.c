/* test_loop.c -- the event loop's thread check (LOOP_ASSERT_THREAD): any
 * thread may set a loop up before it runs and tear it down after; while
 * loop_run() runs it, its own thread may touch it (a posted function
 * arms a timer) and another thread that does is stopped at once with the
 * function named, in a child process so the abort is seen from outside. */
#include "unit.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop__own_thread_and_set_up_may_touch_it),
		cmocka_unit_test(test_loop__another_thread_is_stopped_while_it_runs),
	};

	return cmocka_run_group_tests_name("loop", tests, NULL, NULL);
}
