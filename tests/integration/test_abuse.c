/* test_abuse.c -- abuse a dlockd of its own and check that other clients do
 * not notice: a slowloris (1,000 connections sending a header byte a second)
 * and a flood of 5,000 idle connections at once; and 100,000 distinct names
 * taken and released (10,000 in `make test`), after which neither dlockd
 * nor Redis keeps anything per name. Figures: tests/RELIABILITY.md. */
#include "../harness/harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>


/* ----- Slowloris and idle connections ----- */

enum { SLOW = 1000, IDLE = 5000, HEADER_TIMEOUT_S = 3 };

struct flood {
	int slow[SLOW], idle[IDLE];
	int port, stop;
	pthread_t trickler;
};

/* One header byte a second on every slow connection, never ending it. */
static void *trickle(void *arg)
{
	struct flood *f = arg;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		for (int i = 0; i < SLOW; i++)
			if (f->slow[i] >= 0 && write(f->slow[i], "a", 1) != 1) {
				close(f->slow[i]);
				f->slow[i] = -1;
			}
		sleep_ms(1000);
	}
	return NULL;
}

/* Connections the server has closed (EOF or reset seen). */
static int closed_by_server(const int *fds, int n)
{
	int closed = 0;

	for (int i = 0; i < n; i++) {
		struct pollfd p = { fds[i], POLLIN, 0 };
		char c;

		if (fds[i] < 0) {
			closed++;
			continue;
		}
		if (poll(&p, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0)
			closed++;
	}
	return closed;
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static struct dlockd_srv abuse_d;
static struct flood flood;

static void slowloris_and_idle(void)
{
	static const char *const flags[] = { "--idle-timeout-s", "3", NULL };
	char path[300];
	const char *n = lockname("abused");
	struct http_resp r;
	int64_t until, worst_health = 0, worst_lock = 0;
	int cycles = 0, failures = 0, opened = 0;
	long rss_before, rss_flood;

	raise_fd_limit();
	CHECK(dlockd_start(&abuse_d, NULL, flags) == 0, "start dlockd");
	rss_before = proc_rss_kib(abuse_d.pid);
	for (int i = 0; i < SLOW; i++) {
		static const char head[] = "PUT /locks/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

		flood.slow[i] = raw_connect(abuse_d.port);
		if (flood.slow[i] >= 0 && write(flood.slow[i], head, sizeof(head) - 1) > 0)
			opened++;
	}
	for (int i = 0; i < IDLE; i++) {
		flood.idle[i] = raw_connect(abuse_d.port);
		opened += flood.idle[i] >= 0;
	}
	CHECK(opened == SLOW + IDLE, "opened %d of %d connections", opened, SLOW + IDLE);
	pthread_create(&flood.trickler, NULL, trickle, &flood);
	sleep_ms(300);
	rss_flood = proc_rss_kib(abuse_d.pid);

	/* Meanwhile a well-behaved client gets locks, and probes get answers. */
	snprintf(path, sizeof(path), "/locks/%s?owner=good", n);
	until = mono_ms() + (HEADER_TIMEOUT_S + 3) * 1000;
	while (mono_ms() < until) {
		if (http_on(abuse_d.base, "GET", "/healthz", NULL, &r) != 0 || r.status != 200)
			failures++;
		if (r.ms > worst_health)
			worst_health = (int64_t)r.ms;
		http_free(&r);
		if (http_on(abuse_d.base, "PUT", path, NULL, &r) != 0 || r.status != 200)
			failures++;
		if (r.ms > worst_lock)
			worst_lock = (int64_t)r.ms;
		http_free(&r);
		if (http_on(abuse_d.base, "DELETE", path, NULL, &r) != 0 || r.status != 200)
			failures++;
		http_free(&r);
		cycles++;
		sleep_ms(50);
	}
	printf("# %d slow + %d idle connections: %d lock cycles and probes, %d failed; slowest "
	       "/healthz %lld ms, slowest acquire %lld ms; dlockd RSS %ld -> %ld KiB; closed by "
	       "dlockd after %d s: %d idle, %d slow\n", SLOW, IDLE, cycles, failures,
	       (long long)worst_health, (long long)worst_lock, rss_before, rss_flood,
	       HEADER_TIMEOUT_S + 3, closed_by_server(flood.idle, IDLE),
	       closed_by_server(flood.slow, SLOW));
	CHECK(failures == 0, "%d requests of the well-behaved client failed", failures);
	CHECK(cycles >= 20, "the well-behaved client went on (%d cycles)", cycles);
	CHECK(worst_health < 1000 * slow_factor(), "/healthz kept answering (slowest %lld ms)",
	      (long long)worst_health);
	CHECK(closed_by_server(flood.idle, IDLE) == IDLE, "idle connections are closed after "
	      "--idle-timeout-s");
	CHECK(closed_by_server(flood.slow, SLOW) == SLOW, "slow headers are cut off after "
	      "--idle-timeout-s, however they trickle");
}

TEST(abuse_slowloris_and_idle_flood_leave_room_for_clients)
{
	slowloris_and_idle();
	__atomic_store_n(&flood.stop, 1, __ATOMIC_RELEASE);
	if (flood.trickler)
		pthread_join(flood.trickler, NULL);
	for (int i = 0; i < SLOW; i++)
		if (flood.slow[i] >= 0)
			close(flood.slow[i]);
	for (int i = 0; i < IDLE; i++)
		if (flood.idle[i] >= 0)
			close(flood.idle[i]);
	memset(&flood, 0, sizeof(flood));
	if (abuse_d.pid > 0)
		CHECK(dlockd_stop(&abuse_d, 5000) == 0, "dlockd exits cleanly after the abuse");
}

/* ----- Many distinct names ----- */

/* Built with AddressSanitizer (make test-asan), like the dlockd under test. */
static bool sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return true;
#else
	return false;
#endif
}

enum { NAME_THREADS = 8 };

struct names_run {
	const char *prefix;
	int per_thread, failures;
};

static void *take_names(void *arg)
{
	struct names_run *nr = arg;
	static int next_id;
	int id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
	char path[300];
	struct http_resp r;

	for (int i = 0; i < nr->per_thread; i++) {
		snprintf(path, sizeof(path), "/locks/%s-%d-%d?owner=o&ttl_ms=500", nr->prefix, id, i);
		if (http("PUT", path, NULL, &r) != 0 || r.status != 200)
			__atomic_add_fetch(&nr->failures, 1, __ATOMIC_RELAXED);
		http_free(&r);
		*strstr(path, "&ttl_ms") = '\0';
		if (http("DELETE", path, NULL, &r) != 0 || r.status != 200)
			__atomic_add_fetch(&nr->failures, 1, __ATOMIC_RELAXED);
		http_free(&r);
	}
	return NULL;
}

static long long redis_info_int(const char *field)
{
	redisReply *r = rcmd("INFO memory");
	const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
	long long v = -1;

	if (p && (p = strstr(p, field)))
		v = strtoll(p + strlen(field) + 1, NULL, 10);
	if (r)
		freeReplyObject(r);
	return v;
}

/* How many keys in the shared Redis contain part in their name. */
static long long keys_named(const char *part)
{
	redisReply *r = rcmd("KEYS *%s*", part);
	long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;

	if (r)
		freeReplyObject(r);
	return n;
}

static int run_names(const char *prefix, int total)
{
	pthread_t t[NAME_THREADS];
	struct names_run nr = { prefix, total / NAME_THREADS, 0 };

	for (int i = 0; i < NAME_THREADS; i++)
		pthread_create(&t[i], NULL, take_names, &nr);
	for (int i = 0; i < NAME_THREADS; i++)
		pthread_join(t[i], NULL);
	return nr.failures;
}

TEST(abuse_many_distinct_names_leave_nothing_behind)
{
	int total = chaos_full() ? 100000 : slow_factor() > 1 ? 2000 : 10000;
	const char *warm = lockname("warm"), *many = lockname("many");
	long rss0, rss1;
	long long keys0, keys1, mem0, mem1;
	int64_t t0;

	/* baseline after a first batch, so allocator arenas exist already */
	CHECK(run_names(warm, 2000) == 0, "warm-up requests failed");
	sleep_ms(700);
	keys0 = rcmd_int("DBSIZE");
	mem0 = redis_info_int("used_memory");
	rss0 = proc_rss_kib(H_dlockd.pid);
	t0 = mono_ms();
	CHECK(run_names(many, total) == 0, "requests failed");
	printf("# %d names taken and released in %lld ms\n", total, (long long)(mono_ms() - t0));
	/* the token counters go with their 500 ms leases; DBSIZE also counts
	 * expired keys Redis has not reclaimed yet, so wait for both */
	CHECK(WAIT_FOR(keys_named(many) == 0 && rcmd_int("DBSIZE") <= keys0, 5000),
	      "%lld keys of these names left in Redis; all keys %lld -> %lld",
	      keys_named(many), keys0, rcmd_int("DBSIZE"));
	keys1 = rcmd_int("DBSIZE");
	mem1 = redis_info_int("used_memory");
	rss1 = proc_rss_kib(H_dlockd.pid);
	printf("# after %d names: none of their keys in Redis (all keys %lld -> %lld), "
	       "used_memory %lld -> %lld bytes; dlockd RSS %ld -> %ld KiB\n",
	       total, keys0, keys1, mem0, mem1, rss0, rss1);
	CHECK(mem1 - mem0 < 256 * 1024, "Redis memory back near its baseline (+%lld bytes)",
	      mem1 - mem0);
	/* under valgrind or AddressSanitizer (quarantine) RSS is theirs */
	CHECK(slow_factor() > 1 || sanitized() || rss1 - rss0 < 2048,
	      "dlockd memory back near its baseline (+%ld KiB)", rss1 - rss0);
	CHECK(waiters_of(NULL) == 0, "no waiter left");
}
