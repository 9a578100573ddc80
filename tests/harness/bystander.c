/* bystander.c -- another client's lock cycles, timed (see bystander.h). */
#include "bystander.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *bystand(void *arg)
{
	struct bystander *b = arg;
	const char *name = lockname("bystander");
	char put[160], del[160];

	if (b->has_tls)
		http_tls(&b->tls);
	snprintf(put, sizeof(put), "/locks/%s?owner=b&ttl_ms=10000", name);
	snprintf(del, sizeof(del), "/locks/%s?owner=b", name);
	while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE) && b->ncalls < BYSTANDER_CALLS - 2) {
		const char *const calls[][2] = { { "PUT", put }, { "DELETE", del } };
		int64_t t0 = mono_ms();
		double ms;

		for (int i = 0; i < 2; i++) {
			struct http_resp r;

			if (http_on(b->base, calls[i][0], calls[i][1], NULL, &r) != 0 ||
			    r.status != 200) {
				b->failed++;
				snprintf(b->worst, sizeof(b->worst), "%s %s: %ld %.80s", calls[i][0],
					 calls[i][1], r.status, r.body ? r.body : "");
			}
			b->call_ms[b->ncalls++] = r.ms;
			http_free(&r);
		}
		ms = (double)(mono_ms() - t0);
		if (ms > b->slowest_ms)
			b->slowest_ms = ms;
		b->cycles++;
		if (b->pause_ms > 0)
			sleep_ms(b->pause_ms);
	}
	return NULL;
}

static void stop_at_end(void *arg)
{
	bystander_stop(arg);
}

bool bystander_start(struct bystander *b, const char *base, const struct http_tls *tls,
		     int pause_ms)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->base, sizeof(b->base), "%s", base);
	if (tls) {
		b->tls = *tls;
		b->has_tls = true;
	}
	b->pause_ms = pause_ms;
	if (pthread_create(&b->thread, NULL, bystand, b) != 0)
		return false;
	b->running = true;
	test_at_end(stop_at_end, b);
	return true;
}

void bystander_stop(struct bystander *b)
{
	if (!b->running)
		return;
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
	pthread_join(b->thread, NULL);
	b->running = false;
	test_at_end_cancel(b);
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bystander_call_ms(struct bystander *b, double q)
{
	int i;

	if (b->ncalls == 0)
		return -1;
	qsort(b->call_ms, (size_t)b->ncalls, sizeof(b->call_ms[0]), compare_double);
	i = (int)(q * b->ncalls);
	return b->call_ms[i < b->ncalls ? i : b->ncalls - 1];
}
