/* test_stress.c -- mutual exclusion under contention: 16 clients x 100
 * rounds of acquire-with-wait, a deliberately racy read-modify-write of a
 * shared counter, release. If two clients were ever inside at once the
 * count would come out short; the fencing tokens, recorded in the order the
 * critical sections ran, must strictly increase. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CLIENTS = 16, ROUNDS = 100 };

static const char *stress_name;
static volatile long counter;
static long long tokens[CLIENTS * ROUNDS];
static int errors;

static void *client(void *arg)
{
	int id = (int)(long)arg;
	char acq[512], rel[512];
	struct http_resp r;

	snprintf(acq, sizeof(acq), "/locks/%s?owner=c%d&ttl_ms=20000&wait_ms=120000", stress_name, id);
	snprintf(rel, sizeof(rel), "/locks/%s?owner=c%d", stress_name, id);
	for (int i = 0; i < ROUNDS; i++) {
		long seen;

		if (http("PUT", acq, NULL, &r) != 0 || r.status != 200) {
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
			http_free(&r);
			continue;
		}
		seen = counter;			/* read ... */
		if (seen < CLIENTS * ROUNDS)
			tokens[seen] = json_int(&r, "fencing_token");
		http_free(&r);
		sleep_ms(i % 3);		/* ... widen the window ... */
		counter = seen + 1;		/* ... write */
		if (http("DELETE", rel, NULL, &r) != 0 || r.status != 200)
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
		http_free(&r);
	}
	return NULL;
}

TEST(mutual_exclusion_16_clients_100_rounds)
{
	pthread_t t[CLIENTS];

	stress_name = lockname("counter");
	counter = 0;
	errors = 0;
	for (long i = 0; i < CLIENTS; i++)
		pthread_create(&t[i], NULL, client, (void *)i);
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(t[i], NULL);
	CHECK(errors == 0, "%d requests failed", errors);
	CHECK(counter == CLIENTS * ROUNDS, "counter %ld, want %d: two clients were inside at once",
	      counter, CLIENTS * ROUNDS);
	for (int i = 1; i < CLIENTS * ROUNDS; i++)
		CHECK(tokens[i] > tokens[i - 1], "token of section %d (%lld) not above section %d (%lld)",
		      i, tokens[i], i - 1, tokens[i - 1]);
	CHECK(waiters_of(NULL) == 0, "no waiter left");
}
