/* bystander.h -- another client, timed: a thread that takes and releases
 * a lock of its own over and over on one dlockd while a test does
 * something hostile to that dlockd (or to Redis, or to a second
 * instance). A test then asserts that none of its calls failed and that
 * they stayed fast: one client's abuse must not make another's calls slow.
 * Used by test_http_limits.c, test_redis_midrun.c and test_pileup.c. */
#ifndef DLOCKD_BYSTANDER_H
#define DLOCKD_BYSTANDER_H

#include "harness.h"

#include <pthread.h>
#include <stdbool.h>

#define BYSTANDER_CALLS 20000

struct bystander {
	/* set by bystander_start */
	char base[128];
	struct http_tls tls;
	bool has_tls;
	int pause_ms;		/* between cycles: a client among others, not a flood */
	/* what it saw, read after bystander_stop */
	int cycles, failed;	/* PUT+DELETE cycles; calls not answered 200 */
	double slowest_ms;	/* the slowest cycle */
	int ncalls;		/* each call's time, in call_ms */
	double call_ms[BYSTANDER_CALLS];
	char worst[160];	/* a failed call: its path, status and body */
	int stop;
	bool running;
	pthread_t thread;
};

/* Start cycling PUT/DELETE of a fresh lock on base (tls: how to speak
 * HTTPS, NULL for plain), pause_ms between cycles. b is zeroed first; it
 * must outlive the test (static): the runner stops it when the test ends
 * if the test did not. */
bool bystander_start(struct bystander *b, const char *base, const struct http_tls *tls,
		     int pause_ms);
/* Stop it and wait for its thread; idempotent. */
void bystander_stop(struct bystander *b);
/* The q-th quantile (0..1) of its calls' times in ms, -1 when none; sorts
 * call_ms. After bystander_stop. */
double bystander_call_ms(struct bystander *b, double q);

#endif
