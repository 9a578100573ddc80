/* test_values.c -- holder values: every acquire's optional value, kept with
 * the holding, shown in GET and watch answers, replaced by a repeat that
 * gives one; and the leader-election example of docs/guides/leader-election.md
 * (examples/leader.sh) run as two copies. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static bool body_has(const struct http_resp *r, const char *s)
{
	return r->body && strstr(r->body, s);
}

TEST(value_kept_with_every_kind_and_replaced_by_a_repeat)
{
	static const char *const put[] = { "/locks/%s", "/fairlocks/%s", "/rwlocks/%s/write",
					   "/rwlocks/%s/read" };
	static const char *const get[] = { "/locks/%s", "/fairlocks/%s", "/rwlocks/%s",
					   "/rwlocks/%s" };
	struct http_resp r;
	char p[800], path[400];

	for (int k = 0; k < 4; k++) {
		const char *n = lockname("val");

		snprintf(path, sizeof(path), put[k], n);
		snprintf(p, sizeof(p), "%s?owner=o1&value=%%E2%%9C%%93%%20first", path);
		http("PUT", p, NULL, &r);
		CHECK_STATUS(r, 200, path);
		http_free(&r);
		snprintf(p, sizeof(p), get[k], n);
		http("GET", p, NULL, &r);
		CHECK(body_has(&r, "\"value\": \"\xe2\x9c\x93 first\"") ||
		      body_has(&r, "\"value\":\"\xe2\x9c\x93 first\""), "%s shows it: %s", path,
		      r.body);
		http_free(&r);
		snprintf(p, sizeof(p), "%s?owner=o1", path);
		http("PUT", p, NULL, &r);	/* a repeat without: kept */
		http_free(&r);
		snprintf(p, sizeof(p), "%s?owner=o1&value=second", path);
		http("PUT", p, NULL, &r);
		CHECK_STATUS(r, 200, "a repeat with a value");
		http_free(&r);
		snprintf(p, sizeof(p), get[k], n);
		http("GET", p, NULL, &r);
		CHECK(body_has(&r, "second") && !body_has(&r, "first"), "%s: replaced: %s", path,
		      r.body);
		http_free(&r);
		snprintf(p, sizeof(p), "%s?owner=o1", path);
		http("DELETE", p, NULL, &r);
		http_free(&r);
		snprintf(p, sizeof(p), "%s?owner=o1", path);
		http("PUT", p, NULL, &r);	/* a new holding: no value */
		http_free(&r);
		snprintf(p, sizeof(p), get[k], n);
		http("GET", p, NULL, &r);
		CHECK(!body_has(&r, "\"value\""), "%s: a new holding has none: %s", path, r.body);
		http_free(&r);
		snprintf(p, sizeof(p), "%s?owner=o1", path);
		http("DELETE", p, NULL, &r);
		http_free(&r);
		CHECK(rcmd_int("EXISTS dlockd_lock_owners:{%s}", n) == 0, "nothing left");
	}
}

TEST(value_shown_in_the_listing)
{
	const char *n = lockname("vallist");
	char p[600], q[300], why[256] = "";
	int pages = 0, dups = 0;
	json_t *all, *h;
	struct http_resp r;

	snprintf(p, sizeof(p), "/locks/%s?owner=o&value=10.0.0.9%%3A80", n);
	http("PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "a lock with a value");
	http_free(&r);
	snprintf(q, sizeof(q), "prefix=%s", n);
	all = list_locks_all(NULL, NULL, q, 10, &pages, &dups, why, sizeof(why));
	h = all ? json_array_get(json_object_get(json_object_get(all, n), "holders"), 0) : NULL;
	CHECK(h && json_string_value(json_object_get(h, "value")) &&
	      !strcmp(json_string_value(json_object_get(h, "value")), "10.0.0.9:80"),
	      "listed with its value (%s)", why);
	json_decref(all);
	lock_release(NULL, n, "o");
}

TEST(value_too_large_or_not_utf8_changes_nothing)
{
	const char *n = lockname("valbad");
	char big[1100], body[1300], p[600];
	struct http_resp r;

	memset(big, 'x', 1025);
	big[1025] = '\0';
	snprintf(body, sizeof(body), "{\"owner\": \"o\", \"value\": \"%s\"}", big);
	snprintf(p, sizeof(p), "/locks/%s", n);
	http("PUT", p, body, &r);
	CHECK_ERROR(r, 400, "invalid_argument", "1025 bytes");
	http_free(&r);
	big[1024] = '\0';
	snprintf(body, sizeof(body), "{\"owner\": \"o\", \"value\": \"%s\"}", big);
	http("PUT", p, body, &r);
	CHECK_STATUS(r, 200, "1024 bytes are kept");
	http_free(&r);
	lock_release(NULL, n, "o");
	snprintf(p, sizeof(p), "/locks/%s?owner=o&value=%%C3%%28", n);
	http("PUT", p, NULL, &r);
	CHECK_ERROR(r, 400, "invalid_argument", "not UTF-8");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "nothing taken");
}

static bool says(const char *path, const char *needle)
{
	char buf[8192];

	return strstr(file_read(path, buf, sizeof(buf)), needle) != NULL;
}

TEST(example_leader_election_follower_learns_the_leader_from_the_watch)
{
	static const char *const a_argv[] = { "sh", "examples/leader.sh", "10.0.0.5:8080", NULL };
	static const char *const b_argv[] = { "sh", "examples/leader.sh", "10.0.0.6:8080", NULL };
	const char *lock = lockname("leader");
	char env_url[160], env_lock[160], buf[8192];
	const char *const env[] = { env_url, env_lock, NULL };
	struct proc a, b;
	int64_t t;

	snprintf(env_url, sizeof(env_url), "DLOCKD_URL=%s", H_dlockd.base);
	snprintf(env_lock, sizeof(env_lock), "DLOCKD_LOCK=%s", lock);
	proc_start(&a, a_argv, env, "leader-a");
	CHECK(WAIT_FOR(says(a.out, "leader: 10.0.0.5:8080"), 10000), "the first copy leads: %s %s",
	      file_read(a.out, buf, 4096), file_read(a.err, buf + 4096, 4096));
	proc_start(&b, b_argv, env, "leader-b");
	CHECK(WAIT_FOR(says(b.out, "following 10.0.0.5:8080"), 10000),
	      "the second learns the leader's address: %s %s", file_read(b.out, buf, 4096),
	      file_read(b.err, buf + 4096, 4096));
	CHECK(!says(b.out, "leader:"), "and does not lead");
	kill(-a.pid, SIGINT);
	t = mono_ms();
	CHECK(WAIT_FOR(says(b.out, "leader: 10.0.0.6:8080"), 5000),
	      "it takes over once the leader lets go: %s", file_read(b.out, buf, 4096));
	CHECK(mono_ms() - t < 3000 * slow_factor(), "at once, by the watch");
	proc_kill(&a);
	proc_kill(&b);
}
