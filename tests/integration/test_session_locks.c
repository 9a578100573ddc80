/* test_session_locks.c -- PUT /sessions/{id}/locks (issue 30): several
 * locks for a session all or none; refused after wait_ms with nothing
 * left held that the request took; served once the lock in the way is
 * released; a repeat answers the same holdings; bad bodies refused before
 * Redis; 8 clients over 5 names for 30 s: no deadlock, no overlap, every
 * client served; on a Cluster, names on every shard in one call; the
 * guide's example as written; the session's cap, auth, and Redis going
 * away while a multi-lock waits. */
#include "../harness/harness.h"
#include "../harness/cluster.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* PUT /sessions/id/locks with body on base (NULL: shared); r is the caller's. */
static int multi(const char *base, const char *id, const char *body, struct http_resp *r)
{
	char p[128];

	snprintf(p, sizeof(p), "/sessions/%s/locks", id);
	return base ? http_on(base, "PUT", p, body, r) : http("PUT", p, body, r);
}

/* The fencing token of holding (kind, name) in answer r; 0 if absent. */
static long long token_in(const struct http_resp *r, const char *kind, const char *name)
{
	json_t *h = r->json ? json_object_get(r->json, "holdings") : NULL, *it;
	size_t i;

	json_array_foreach(h, i, it) {
		if (!strcmp(json_string_value(json_object_get(it, "kind")), kind) &&
		    !strcmp(json_string_value(json_object_get(it, "name")), name))
			return json_integer_value(json_object_get(it, "fencing_token"));
	}
	return 0;
}

/* The name the 409 names as in the way. */
static const char *blocker_of(const struct http_resp *r)
{
	json_t *lock = r->json ? json_object_get(r->json, "lock") : NULL;

	return lock ? json_string_value(json_object_get(lock, "name")) : NULL;
}

TEST(session_locks_all_or_nothing_with_a_blocker)
{
	const char *n = lockname("ml-block");
	char id[33], body[700], c[256];
	struct http_resp r;
	int64_t t0;

	CHECK(status_of(NULL, "PUT", "/rwlocks/%s-c/write?owner=blocker&ttl_ms=30000", n) == 200,
	      "a blocker writes c");
	CHECK(session_start_on(NULL, 30000, id), "a session starts");
	snprintf(body, sizeof(body),
		 "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-a\"},"
		 "{\"kind\":\"semaphore\",\"name\":\"%s-b\",\"limit\":1},"
		 "{\"kind\":\"read\",\"name\":\"%s-c\"},{\"kind\":\"fair\",\"name\":\"%s-d\"}],"
		 "\"wait_ms\":700}", n, n, n, n);
	t0 = mono_ms();
	CHECK(multi(NULL, id, body, &r) == 0, "PUT answers");
	CHECK_ERROR(r, 409, "locked", "the set with a blocked member");
	CHECK(mono_ms() - t0 >= 650, "after wait_ms (%lld ms)", (long long)(mono_ms() - t0));
	snprintf(c, sizeof(c), "%s-c", n);
	CHECK(blocker_of(&r) && !strcmp(blocker_of(&r), c), "it names %s: %s", c, r.body);
	http_free(&r);
	/* nothing of it is held */
	CHECK(flag_of(NULL, "locked", "/locks/%s-a", n) == 0, "a is free");
	CHECK(flag_of(NULL, "locked", "/fairlocks/%s-d", n) == 0, "d is free");
	CHECK(status_of(NULL, "PUT", "/semaphores/%s-b?owner=other&limit=1&ttl_ms=1000", n) == 200,
	      "b's one permit is free");
	CHECK(status_of(NULL, "DELETE", "/semaphores/%s-b?owner=other", n) == 200, "given back");
	snprintf(c, sizeof(c), "/sessions/%s", id);
	CHECK(http("GET", c, NULL, &r) == 0 && r.status == 200, "GET the session");
	CHECK(json_array_size(json_object_get(r.json, "holdings")) == 0, "it holds nothing: %s",
	      r.body);
	http_free(&r);
	/* without wait_ms: at once */
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-a\"},"
		 "{\"kind\":\"write\",\"name\":\"%s-c\"}]}", n, n);
	t0 = mono_ms();
	CHECK(multi(NULL, id, body, &r) == 0, "PUT answers");
	CHECK_ERROR(r, 409, "locked", "the set without wait_ms");
	CHECK(mono_ms() - t0 < 1000 * slow_factor(), "at once");
	http_free(&r);
	CHECK(flag_of(NULL, "locked", "/locks/%s-a", n) == 0, "a is free");
	CHECK(status_of(NULL, "DELETE", "/rwlocks/%s-c/write?owner=blocker", n) == 200, "cleanup");
	CHECK(http("DELETE", c, NULL, &r) == 0 && r.status == 200, "end the session");
	http_free(&r);
}

TEST(session_locks_wait_and_are_served_when_the_blocker_releases)
{
	const char *n = lockname("ml-wait");
	char id[33], body[700], p[256];
	struct http_resp r;
	struct bg w;
	int64_t t;
	long long tok1;

	CHECK(lock_hold(NULL, n, "blocker", 30000), "a blocker holds %s", n);
	CHECK(session_start_on(NULL, 30000, id), "a session starts");
	snprintf(body, sizeof(body),
		 "{\"locks\":[{\"kind\":\"write\",\"name\":\"%s-w\"},{\"kind\":\"lock\",\"name\":\"%s\"},"
		 "{\"kind\":\"semaphore\",\"name\":\"%s-s\",\"limit\":2}],\"wait_ms\":20000}", n, n, n);
	snprintf(p, sizeof(p), "/sessions/%s/locks", id);
	bg_start(&w, "PUT", p, body);
	CHECK(wait_waiters(NULL, 1, 5000), "the multi-lock waits");
	sleep_ms(300);	/* let it park (subscribe and retry): the release must wake it */
	CHECK(flag_of(NULL, "locked", "/rwlocks/%s-w", n) == 0,
	      "it holds nothing while it waits (the write lock is free)");
	CHECK(lock_release(NULL, n, "blocker") == 200, "the blocker releases");
	t = mono_ms();
	CHECK_GRANTED_WITHIN(w, t, 1000, "the multi-lock");
	tok1 = token_in(&w.r, "lock", n);
	CHECK(tok1 > 0, "with its token: %s", w.r.body);
	CHECK(json_array_size(json_object_get(w.r.json, "holdings")) == 3, "three: %s", w.r.body);
	http_free(&w.r);
	/* a repeat answers the same holdings */
	CHECK(multi(NULL, id, body, &r) == 0 && r.status == 200, "the repeat: %ld %s", r.status,
	      r.body ? r.body : "");
	CHECK(token_in(&r, "lock", n) == tok1, "the same token");
	http_free(&r);
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http("GET", p, NULL, &r) == 0 && r.status == 200, "GET the session");
	CHECK(json_array_size(json_object_get(r.json, "holdings")) == 3, "the session lists 3: %s",
	      r.body);
	http_free(&r);
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=other&ttl_ms=1000", n) == 409, "held");
	CHECK(http("DELETE", p, NULL, &r) == 0 && r.status == 200, "end the session");
	http_free(&r);
	CHECK(flag_of(NULL, "locked", "/locks/%s", n) == 0, "free again");
}

TEST(session_locks_refuse_bad_bodies_before_redis)
{
	static const char *const bad[][2] = {
		{ "x", "invalid_json" },
		{ "[]", "invalid_json" },
		{ "{}", "invalid_argument" },
		{ "{\"locks\":[]}", "invalid_argument" },
		{ "{\"locks\":{}}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lox\",\"name\":\"a\"}]}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a b\"}]}", "invalid_name" },
		{ "{\"locks\":[{\"kind\":\"lock\"}]}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\",\"owner\":\"x\"}]}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"semaphore\",\"name\":\"a\"}]}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"semaphore\",\"name\":\"a\",\"limit\":0}]}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\",\"limit\":2}]}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\"},{\"kind\":\"lock\",\"name\":\"a\"}]}",
		  "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"read\",\"name\":\"a\"},{\"kind\":\"write\",\"name\":\"a\"}]}",
		  "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\"}],\"wait_ms\":-1}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\"}],\"wait_ms\":\"1\"}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\"}],\"ttl_ms\":1}", "invalid_argument" },
		{ "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\"}],\"locks\":[]}", "invalid_json" },
	};
	char id[33], p[128], many[8192];
	struct http_resp r;
	long long calls = redis_scripts_called();
	size_t len;

	CHECK(session_start_on(NULL, 30000, id), "a session starts");
	calls = redis_scripts_called();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(multi(NULL, id, bad[i][0], &r) == 0, "PUT answers");
		CHECK_ERROR(r, 400, bad[i][1], bad[i][0]);
		http_free(&r);
	}
	len = (size_t)snprintf(many, sizeof(many), "{\"locks\":[");
	for (int i = 0; i < 65; i++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%s{\"kind\":\"lock\","
					"\"name\":\"m%d\"}", i ? "," : "", i);
	snprintf(many + len, sizeof(many) - len, "]}");
	CHECK(multi(NULL, id, many, &r) == 0, "PUT answers");
	CHECK_ERROR(r, 400, "invalid_argument", "65 locks");
	http_free(&r);
	snprintf(p, sizeof(p), "/sessions/%s/locks?wait_ms=1", id);
	CHECK(http("PUT", p, "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\"}]}", &r) == 0, "PUT");
	CHECK_ERROR(r, 400, "invalid_argument", "a query parameter");
	http_free(&r);
	CHECK(redis_scripts_called() == calls, "none reached Redis (%lld scripts ran)",
	      redis_scripts_called() - calls);
	CHECK(multi(NULL, "0123456789abcdef0123456789abcdef",
		    "{\"locks\":[{\"kind\":\"lock\",\"name\":\"a\"}]}", &r) == 0, "PUT answers");
	CHECK_ERROR(r, 404, "session_not_found", "a session that never was");
	http_free(&r);
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http("DELETE", p, NULL, &r) == 0 && r.status == 200, "end the session");
	http_free(&r);
}

/* ----- 8 clients, 5 names, random overlapping sets ----- */

#define STRESS_CLIENTS 8
#define STRESS_NAMES 5

struct stress {
	const char *prefix;
	int64_t until;
	atomic_int inside[STRESS_NAMES];	/* clients inside a name's section */
	atomic_long overlaps;
	atomic_long grants[STRESS_CLIENTS];
	atomic_long refused, failed;
	int id;
};

struct stress_client {
	struct stress *s;
	int i;
	pthread_t t;
};

static void *stress_run(void *arg)
{
	struct stress_client *c = arg;
	struct stress *s = c->s;
	unsigned seed = (unsigned)(c->i * 7919 + 1);
	char id[33], body[1024], p[128];

	if (!session_start_on(NULL, 30000, id)) {
		atomic_fetch_add(&s->failed, 1);
		return NULL;
	}
	snprintf(p, sizeof(p), "/sessions/%s/heartbeat", id);
	while (mono_ms() < s->until) {
		bool pick[STRESS_NAMES] = { false };
		int npick = 1 + (int)(rand_r(&seed) % 3);
		size_t len = (size_t)snprintf(body, sizeof(body), "{\"locks\":[");
		struct http_resp r;
		bool first = true;

		for (int k = 0; k < npick; k++)
			pick[rand_r(&seed) % STRESS_NAMES] = true;
		for (int k = STRESS_NAMES - 1; k >= 0; k--)	/* any order: dlockd sorts */
			if (pick[k]) {
				len += (size_t)snprintf(body + len, sizeof(body) - len,
							"%s{\"kind\":\"lock\",\"name\":\"%s-%d\"}",
							first ? "" : ",", s->prefix, k);
				first = false;
			}
		snprintf(body + len, sizeof(body) - len, "],\"wait_ms\":10000}");
		if (multi(NULL, id, body, &r) != 0 || (r.status != 200 && r.status != 409)) {
			printf("# client %d: %ld %s\n", c->i, r.status, r.body ? r.body : "");
			atomic_fetch_add(&s->failed, 1);
			http_free(&r);
			break;
		}
		if (r.status == 409) {
			atomic_fetch_add(&s->refused, 1);
			http_free(&r);
			continue;
		}
		http_free(&r);
		atomic_fetch_add(&s->grants[c->i], 1);
		for (int k = 0; k < STRESS_NAMES; k++)
			if (pick[k] && atomic_fetch_add(&s->inside[k], 1) != 0)
				atomic_fetch_add(&s->overlaps, 1);
		sleep_ms((int)(rand_r(&seed) % 20));	/* the section: under test */
		for (int k = 0; k < STRESS_NAMES; k++)
			if (pick[k])
				atomic_fetch_sub(&s->inside[k], 1);
		for (int k = 0; k < STRESS_NAMES; k++) {
			char rel[300];

			if (!pick[k])
				continue;
			snprintf(rel, sizeof(rel), "/locks/%s-%d?owner=%s", s->prefix, k, id);
			if (status_of(NULL, "DELETE", "%s", rel) != 200)
				atomic_fetch_add(&s->failed, 1);
		}
		if (status_of(NULL, "POST", "%s", p) != 200)
			atomic_fetch_add(&s->failed, 1);
	}
	snprintf(p, sizeof(p), "/sessions/%s", id);
	status_of(NULL, "DELETE", "%s", p);
	return NULL;
}

TEST(session_locks_eight_clients_over_five_names_never_deadlock_or_overlap)
{
	static struct stress s;
	struct stress_client c[STRESS_CLIENTS];
	long total = 0, least = -1;

	memset(&s, 0, sizeof(s));
	s.prefix = lockname("ml-stress");
	s.until = mono_ms() + 30000;
	for (int i = 0; i < STRESS_CLIENTS; i++) {
		c[i] = (struct stress_client){ .s = &s, .i = i };
		CHECK(pthread_create(&c[i].t, NULL, stress_run, &c[i]) == 0, "client %d starts", i);
	}
	for (int i = 0; i < STRESS_CLIENTS; i++)
		pthread_join(c[i].t, NULL);
	for (int i = 0; i < STRESS_CLIENTS; i++) {
		long g = atomic_load(&s.grants[i]);

		total += g;
		if (least < 0 || g < least)
			least = g;
	}
	printf("# 30 s, 8 clients, 5 names: %ld grants (the least served client %ld), %ld "
	       "refused after 10 s, %ld failures, %ld overlaps\n", total, least,
	       atomic_load(&s.refused), atomic_load(&s.failed), atomic_load(&s.overlaps));
	CHECK(atomic_load(&s.overlaps) == 0, "no two clients inside one name at once");
	CHECK(atomic_load(&s.failed) == 0, "no request failed");
	CHECK(least >= 1, "every client was served at least once");
	for (int k = 0; k < STRESS_NAMES; k++)
		CHECK(flag_of(NULL, "locked", "/locks/%s-%d", s.prefix, k) == 0, "name %d is free", k);
}

static struct redis_cluster ml_cluster;

TEST(session_locks_on_a_cluster_take_names_on_every_shard_at_once)
{
	struct redis_cluster *cl = &ml_cluster;
	struct dlockd_srv d;
	char names[3][128], url[300], id[33], body[800], p[200];
	struct http_resp r;
	struct bg w;
	int64_t t;

	CHECK(cluster_start(cl, 3, 0) == 0, "the cluster starts");
	test_at_end(cluster_stop_at_end, cl);
	snprintf(url, sizeof(url), "redis://%s", cl->seeds);
	CHECK(dlockd_start(&d, url, NULL) == 0, "dlockd starts on the cluster");
	CHECK(cluster_names_per_master(cl, "ml-shard", names), "a name on each master");
	CHECK(session_start_on(d.base, 30000, id), "a session starts");
	CHECK(status_of(&d, "PUT", "/locks/%s?owner=blocker&ttl_ms=30000", names[2]) == 200,
	      "a blocker on shard 2");
	snprintf(body, sizeof(body),
		 "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s\"},{\"kind\":\"write\",\"name\":\"%s\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s\"}],\"wait_ms\":20000}", names[0], names[1], names[2]);
	snprintf(p, sizeof(p), "/sessions/%s/locks", id);
	bg_start_on(&w, d.base, "PUT", p, body);
	CHECK(wait_waiters(&d, 1, 5000), "it waits for shard 2");
	sleep_ms(300);	/* let it park: the release must wake it */
	CHECK(flag_of(&d, "locked", "/locks/%s", names[0]) == 0, "holding nothing meanwhile");
	CHECK(status_of(&d, "DELETE", "/locks/%s?owner=blocker", names[2]) == 200, "released");
	t = mono_ms();
	CHECK_GRANTED_WITHIN(w, t, 1000, "the multi-lock over three shards");
	CHECK(json_array_size(json_object_get(w.r.json, "holdings")) == 3, "three: %s", w.r.body);
	http_free(&w.r);
	snprintf(p, sizeof(p), "/sessions/%s", id);
	CHECK(http_on(d.base, "DELETE", p, NULL, &r) == 0 && r.status == 200, "end it");
	CHECK(json_array_size(json_object_get(r.json, "released")) == 3, "released three: %s", r.body);
	http_free(&r);
	for (int i = 0; i < 3; i++)
		CHECK(status_of(&d, "PUT", "/locks/%s?owner=after&ttl_ms=1000", names[i]) == 200,
		      "shard %d's lock is free", i);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* A client that hangs up while its multi-lock waits is forgotten: it
 * stops waiting, holds nothing, and the lock in the way, once released,
 * is free for others (not granted to the request nobody reads). */
TEST(session_locks_forget_a_client_that_hangs_up_while_waiting)
{
	const char *n = lockname("ml-hangup");
	char id[33], body[400], req[900];
	struct http_resp r;
	int fd;

	CHECK(lock_hold(NULL, n, "blocker", 30000), "a blocker holds %s", n);
	CHECK(session_start_on(NULL, 30000, id), "a session starts");
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-a\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s\"}],\"wait_ms\":20000}", n, n);
	snprintf(req, sizeof(req), "PUT /sessions/%s/locks HTTP/1.1\r\nHost: x\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", id,
		 strlen(body), body);
	fd = raw_connect(H_dlockd.port);
	CHECK(fd >= 0, "connected");
	CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "sent");
	CHECK(wait_waiters(NULL, 1, 5000), "it waits");
	close(fd);
	CHECK(wait_no_waiters(NULL, 5000), "it stops waiting once its client hangs up");
	CHECK(flag_of(NULL, "locked", "/locks/%s-a", n) == 0, "it holds nothing");
	CHECK(lock_release(NULL, n, "blocker") == 200, "the blocker releases");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=next&ttl_ms=1000", n) == 200,
	      "the lock goes to the next client");
	CHECK(lock_release(NULL, n, "next") == 200, "released");
	snprintf(req, sizeof(req), "/sessions/%s", id);
	CHECK(http("GET", req, NULL, &r) == 0 && r.status == 200, "GET the session");
	CHECK(json_array_size(json_object_get(r.json, "holdings")) == 0, "it holds nothing: %s",
	      r.body);
	http_free(&r);
	CHECK(http("DELETE", req, NULL, &r) == 0 && r.status == 200, "end it");
	http_free(&r);
}

/* The "several locks at once" script of docs/guides/sessions.md, run as it
 * is written: both locks granted, the set with the held one refused naming
 * it, and the session ends holding the two it took, no more. */
TEST(session_locks_guide_example_runs)
{
	char buf[8192];
	const char *refused, *ended;

	CHECK(doc_sh_run("docs/guides/sessions.md",
			 "<!-- run-by: test_session_locks.c session_locks_guide_example_runs -->",
			 20000, buf, sizeof(buf)) == 0, "every command of the example succeeds: %s",
	      buf);
	CHECK(strstr(buf, "\"kind\":\"lock\",\"name\":\"guide-accounts\"") &&
	      strstr(buf, "\"kind\":\"write\",\"name\":\"guide-ledger\""), "both held: %s", buf);
	refused = strstr(buf, "\"error\":\"locked\"");
	CHECK(refused && strstr(refused, "\"lock\":{\"kind\":\"lock\",\"name\":\"guide-archive\"}"),
	      "the second set is refused naming guide-archive: %s", buf);
	ended = strstr(buf, "\"ended\":true");
	CHECK(ended && strstr(ended, "guide-accounts") && strstr(ended, "guide-ledger") &&
	      !strstr(ended, "guide-archive"), "the session released the two it took: %s", buf);
	CHECK(flag_of(NULL, "locked", "/locks/guide-accounts") == 0, "guide-accounts is free");
	CHECK(flag_of(NULL, "locked", "/locks/guide-archive") == 0, "guide-archive is free");
	CHECK(flag_of(NULL, "locked", "/rwlocks/guide-ledger") == 0, "guide-ledger is free");
}

/* The session's holdings cap counts what the set adds to what it holds:
 * past it, 409 session_full and nothing of the set is held; more entries
 * than the cap is a bad body (400, before Redis); a repeat adds nothing. */
TEST(session_locks_past_the_session_cap_take_nothing)
{
	const char *n = lockname("ml-cap");
	const char *flags[] = { "--max-session-holdings", "3", NULL };
	struct dlockd_srv d;
	struct http_resp r;
	char id[33], body[600];

	CHECK(dlockd_start(&d, NULL, flags) == 0, "dlockd --max-session-holdings 3");
	CHECK(session_start_on(d.base, 30000, id), "a session starts");
	CHECK(status_of(&d, "PUT", "/locks/%s-a?session=%s", n, id) == 200, "it holds a");
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-a\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s-b\"},{\"kind\":\"lock\",\"name\":\"%s-c\"}]}",
		 n, n, n);
	CHECK(multi(d.base, id, body, &r) == 0 && r.status == 200,
	      "a, b and c: three holdings, the cap: %ld %s", r.status, r.body ? r.body : "");
	http_free(&r);
	CHECK(multi(d.base, id, body, &r) == 0 && r.status == 200, "the repeat adds nothing");
	http_free(&r);
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-a\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s-d\"}],\"wait_ms\":500}", n, n);
	CHECK(multi(d.base, id, body, &r) == 0, "PUT answers");
	CHECK_ERROR(r, 409, "session_full", "a fourth holding");
	CHECK(json_integer_value(json_object_get(r.json, "limit")) == 3, "limit 3: %s", r.body);
	http_free(&r);
	CHECK(flag_of(&d, "locked", "/locks/%s-d", n) == 0, "d is not held");
	CHECK(flag_of(&d, "locked", "/locks/%s-a", n) == 1, "a, held before, still is");
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-1\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s-2\"},{\"kind\":\"lock\",\"name\":\"%s-3\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s-4\"}]}", n, n, n, n);
	CHECK(multi(d.base, id, body, &r) == 0, "PUT answers");
	CHECK_ERROR(r, 400, "invalid_argument", "more entries than a session may hold");
	http_free(&r);
	CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "end it");
	CHECK(flag_of(&d, "locked", "/locks/%s-c", n) == 0, "its locks are released");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

#define ML_TOK_A "tok-ml-a-5e2b8d1c9f"
#define ML_TOK_B "tok-ml-b-3f7a0c6e2d"

/* Under auth every name of the set is checked against the token's prefix
 * (403, nothing taken), and another token's session is no session (404). */
TEST(session_locks_under_auth_check_every_name_and_the_session)
{
	char id[33];
	const char *body = "{\"locks\":[{\"kind\":\"lock\",\"name\":\"mlauth-a\"},"
			   "{\"kind\":\"lock\",\"name\":\"elsewhere-b\"}]}";
	struct dlockd_srv d;
	struct http_resp r;

	CHECK(dlockd_start_auth(&d, "multilock-tokens", ML_TOK_A " client mlauth- team-a\n"
				ML_TOK_B " client mlauth- team-b\n") == 0, "start with --auth-file");
	http_bearer(ML_TOK_A);
	CHECK(session_start_on(d.base, 30000, id), "team-a makes a session");
	CHECK(multi(d.base, id, body, &r) == 0, "PUT answers");
	CHECK_ERROR(r, 403, "forbidden", "a name outside the token's prefix");
	http_free(&r);
	CHECK(flag_of(&d, "locked", "/locks/mlauth-a") == 0, "nothing was taken");
	http_bearer(ML_TOK_B);
	CHECK(multi(d.base, id, "{\"locks\":[{\"kind\":\"lock\",\"name\":\"mlauth-a\"}]}", &r) == 0,
	      "PUT answers");
	CHECK_ERROR(r, 404, "session_not_found", "team-b using team-a's session");
	http_free(&r);
	http_bearer(ML_TOK_A);
	CHECK(flag_of(&d, "locked", "/locks/mlauth-a") == 0, "still nothing taken");
	CHECK(multi(d.base, id, "{\"locks\":[{\"kind\":\"lock\",\"name\":\"mlauth-a\"}]}", &r) == 0 &&
	      r.status == 200, "team-a takes it for its session");
	http_free(&r);
	CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "end it");
	http_bearer(NULL);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* Redis going away while a multi-lock waits neither crashes nor hangs
 * dlockd: the request is answered 503 by its wait_ms (nothing of it is
 * known to stand: what it took was given back before it waited), and
 * dlockd still exits cleanly. */
TEST(session_locks_answer_when_redis_goes_away_while_waiting)
{
	const char *n = lockname("ml-redis-gone");
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char id[33], body[400], p[128];
	struct bg w;

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "a Redis and a dlockd of the test's own");
	CHECK(status_of(&d, "PUT", "/locks/%s-b?owner=blocker&ttl_ms=30000", n) == 200,
	      "a blocker holds b");
	CHECK(session_start_on(d.base, 30000, id), "a session");
	snprintf(body, sizeof(body), "{\"locks\":[{\"kind\":\"lock\",\"name\":\"%s-a\"},"
		 "{\"kind\":\"lock\",\"name\":\"%s-b\"}],\"wait_ms\":3000}", n, n);
	snprintf(p, sizeof(p), "/sessions/%s/locks", id);
	bg_start_on(&w, d.base, "PUT", p, body);
	CHECK(wait_waiters(&d, 1, 5000), "it waits for b");
	CHECK(flag_of(&d, "locked", "/locks/%s-a", n) == 0, "holding nothing meanwhile");
	redis_stop(&rs, true);
	bg_join(&w);
	CHECK_ERROR(w.r, 503, "backend_unavailable", "the multi-lock once Redis is gone");
	CHECK(w.r.ms < 3000.0 + 5000.0 * slow_factor(), "answered by its wait_ms (%.0f ms)",
	      w.r.ms);
	http_free(&w.r);
	CHECK(status_of(&d, "GET", "/healthz") == 200, "dlockd still answers");
	CHECK(dlockd_stop(&d, 5000) == 0, "and exits cleanly");
}
