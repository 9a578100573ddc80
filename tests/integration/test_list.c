/* test_list.c -- GET /locks, the listing of the locks held: every kind
 * with its holders and lease, only names under the prefix asked for (and
 * under --key-prefix, shown without it), paged with a cursor; exactly the
 * locks, each once, among 100,000 keys that are not locks (hashes without
 * a TTL or with fields that are no hold counts among them); a token must
 * cover the prefix; bad parameters 400; Redis down 503, a refused SCAN
 * 500, and dlockd goes on. */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *holder(json_t *e, const char *owner, const char *mode)
{
	json_t *h;
	size_t i;

	json_array_foreach(json_object_get(e, "holders"), i, h) {
		const char *o = json_string_value(json_object_get(h, "owner"));
		const char *m = json_string_value(json_object_get(h, "mode"));

		if (o && !strcmp(o, owner) && (!mode || (m && !strcmp(m, mode))))
			return h;
	}
	return NULL;
}

static long long holds_of(json_t *e, const char *owner, const char *mode)
{
	json_t *h = holder(e, owner, mode);

	return h ? json_integer_value(json_object_get(h, "holds")) : -1;
}

static void decref(void *j)
{
	json_decref(j);
}

static const char *str_of(json_t *e, const char *key)
{
	const char *s = json_string_value(json_object_get(e, key));

	return s ? s : "(none)";
}

TEST(list_shows_the_locks_of_every_kind_with_holders_and_lease)
{
	const char *p = lockname("ls");
	const char *kp[] = { "--key-prefix", "kp9:", NULL };
	struct dlockd_srv d;
	char why[600], n[8][160];
	int pages, dups;
	json_t *all, *e;

	for (int i = 0; i < 8; i++)
		snprintf(n[i], sizeof(n[i]), "%s-%c", p, 'a' + i);
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=w1", n[0]) == 200, "a lock");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=w1&reentrant=true", n[0]) == 200,
	      "re-entered");
	CHECK(status_of(NULL, "PUT", "/fairlocks/%s?owner=f1&ttl_ms=20000", n[1]) == 200,
	      "a fair lock");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=r1", n[2]) == 200, "a reader");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=r2", n[2]) == 200, "another");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/write?owner=wr", n[3]) == 200, "a writer");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=wr", n[3]) == 200, "downgrading");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=r1", n[4]) == 200, "a reader");
	CHECK(status_of(NULL, "PUT", "/rwlocks/%s/read?owner=r2&ttl_ms=100", n[4]) == 200,
	      "a reader whose hold runs out");
	CHECK(status_of(NULL, "PUT", "/locks/%s?owner=w1", n[5]) == 200, "a lock");
	CHECK(status_of(NULL, "DELETE", "/locks/%s?owner=w1", n[5]) == 200, "released");
	rcmd_int("HSET %s w 1", n[6]);			/* no TTL: not a lock */
	rcmd_int("HSET %s w x", n[7]);			/* no hold count: not a lock */
	rcmd_int("PEXPIRE %s 60000", n[7]);
	CHECK(status_of(NULL, "PUT", "/locks/x%s?owner=w1", p) == 200, "a lock under another prefix");
	sleep_ms(300);		/* the wait is what is tested: r2's read hold runs out */

	all = list_locks_all(NULL, NULL, "prefix=", 100, &pages, &dups, why, sizeof(why));
	CHECK(all, "%s", why);
	json_decref(all);
	{
		char q[200];

		snprintf(q, sizeof(q), "prefix=%s", p);
		all = list_locks_all(NULL, NULL, q, 100, &pages, &dups, why, sizeof(why));
	}
	CHECK(all, "%s", why);
	test_at_end(decref, all);
	CHECK(json_object_size(all) == 5 && dups == 0, "the five locks held, once: %s",
	      json_dumps(all, JSON_COMPACT));
	e = json_object_get(all, n[0]);
	CHECK(!strcmp(str_of(e, "kind"), "lock") && holds_of(e, "w1", NULL) == 2 &&
	      json_array_size(json_object_get(e, "holders")) == 1 &&
	      json_integer_value(json_object_get(e, "ttl_ms")) > 0 &&
	      json_integer_value(json_object_get(e, "ttl_ms")) <= 30000 &&
	      !json_object_get(e, "mode"), "a lock, its owner, holds and lease: %s",
	      json_dumps(e, JSON_COMPACT));
	e = json_object_get(all, n[1]);
	CHECK(!strcmp(str_of(e, "kind"), "lock") && holds_of(e, "f1", NULL) == 1 &&
	      json_integer_value(json_object_get(e, "ttl_ms")) <= 20000,
	      "a fair lock is kept like a lock: %s", json_dumps(e, JSON_COMPACT));
	e = json_object_get(all, n[2]);
	CHECK(!strcmp(str_of(e, "kind"), "rwlock") && !strcmp(str_of(e, "mode"), "read") &&
	      holds_of(e, "r1", "read") == 1 && holds_of(e, "r2", "read") == 1,
	      "a read lock and its readers: %s", json_dumps(e, JSON_COMPACT));
	e = json_object_get(all, n[3]);
	CHECK(!strcmp(str_of(e, "mode"), "write") && holds_of(e, "wr", "write") == 1 &&
	      holds_of(e, "wr", "read") == 1 && json_array_size(json_object_get(e, "holders")) == 2,
	      "a write lock, its writer also reading: %s", json_dumps(e, JSON_COMPACT));
	e = json_object_get(all, n[4]);
	CHECK(holds_of(e, "r1", "read") == 1 && !holder(e, "r2", NULL),
	      "a read hold that ran out is not listed: %s", json_dumps(e, JSON_COMPACT));

	/* paged one at a time: the same five */
	{
		char q[200];
		json_t *paged;

		snprintf(q, sizeof(q), "prefix=%s", p);
		paged = list_locks_all(NULL, NULL, q, 1, &pages, &dups, why, sizeof(why));
		CHECK(paged, "%s", why);
		CHECK(json_object_size(paged) == 5 && dups == 0 && pages >= 5,
		      "one lock a page: %zu locks, %d twice, %d pages", json_object_size(paged),
		      dups, pages);
		json_decref(paged);
	}

	/* --key-prefix: only its own locks, shown without it */
	CHECK(dlockd_start(&d, NULL, kp) == 0, "start with --key-prefix");
	CHECK(status_of(&d, "PUT", "/locks/%s?owner=k1", n[0]) == 200, "a lock under the key prefix");
	CHECK(rcmd_int("EXISTS kp9:%s", n[0]) == 1, "kept as kp9:<name>");
	{
		char q[200];
		json_t *mine;

		snprintf(q, sizeof(q), "prefix=%s", p);
		mine = list_locks_all(&d, NULL, q, 10, &pages, &dups, why, sizeof(why));
		CHECK(mine, "%s", why);
		e = json_object_get(mine, n[0]);
		CHECK(json_object_size(mine) == 1 && e && holds_of(e, "k1", NULL) == 1,
		      "only the key prefix's lock, by its name: %s", json_dumps(mine, JSON_COMPACT));
		json_decref(mine);
	}
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	rcmd_int("DEL kp9:%s %s %s %s %s %s %s %s x%s", n[0], n[0], n[1], n[2], n[3], n[4], n[6],
		 n[7], p);
}

/* Run a Lua script on rs; its integer answer (-1 if none). */
static long long lua_on(const struct redis_srv *rs, const char *script)
{
	redisContext *c = redis_client(rs);
	redisReply *r = c ? redisCommand(c, "EVAL %s 0", script) : NULL;
	long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

	freeReplyObject(r);
	if (c)
		redisFree(c);
	return v;
}

TEST(list_finds_exactly_the_locks_among_100000_other_keys)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	static const char *const kinds[] = { "/locks/%s?owner=o%d&ttl_ms=120000",
					     "/fairlocks/%s?owner=o%d&ttl_ms=120000",
					     "/rwlocks/%s/read?owner=o%d&ttl_ms=120000",
					     "/rwlocks/%s/write?owner=o%d&ttl_ms=120000" };
	char why[600], name[64], path[200];
	int pages, dups;
	int64_t t0;
	json_t *all;

	CHECK(redis_start(&rs) == 0, "start Redis");
	CHECK(dlockd_start_on(&d, &rs, NULL) == 0, "start dlockd");
	for (int i = 0; i < 9; i++) {
		snprintf(name, sizeof(name), "lk-%d", i);
		snprintf(path, sizeof(path), kinds[i % 4], name, i);
		CHECK(status_of(&d, "PUT", "%s", path) == 200, "lock %s", name);
	}
	/* 100,000 keys that are not locks, three quarters of them under the
	 * prefix: hashes without a TTL, hashes with a TTL whose fields are no
	 * hold counts, lists, and strings elsewhere */
	/* in 10 scripts of 10,000: one would outlast the harness's 2 s Redis
	 * timeout on a loaded machine */
	for (int from = 1; from <= 100000; from += 10000) {
		char script[600];

		snprintf(script, sizeof(script),
			 "for i = %d, %d do "
			 "  local k = i %% 4 "
			 "  if k == 0 then redis.call('set', 'junk:' .. i, i) "
			 "  elseif k == 1 then redis.call('hset', 'lk-h' .. i, 'f', 1) "
			 "  elseif k == 2 then redis.call('hset', 'lk-t' .. i, 'f', 'text') "
			 "    redis.call('pexpire', 'lk-t' .. i, 600000) "
			 "  else redis.call('rpush', 'lk-l' .. i, 'x') end "
			 "end return redis.call('dbsize')", from, from + 9999);
		CHECK(lua_on(&rs, script) >= from + 9999 + 9, "other keys %d..%d", from,
		      from + 9999);
	}

	/* and 300 locks side by side (Redisson's layout, as its clients
	 * write it), for pages much smaller than a SCAN's batch */
	CHECK(lua_on(&rs, "for i = 1, 300 do "
			  "  redis.call('hset', 'dn-' .. i, 'owner-' .. i, 1) "
			  "  redis.call('pexpire', 'dn-' .. i, 120000) "
			  "end return 300") == 300, "300 locks");

	static const struct { const char *query; int limit; size_t locks; } passes[] = {
		{ "prefix=lk-", 2, 9 }, { "prefix=", 4, 309 }, { "prefix=dn-", 1, 300 },
		{ "prefix=dn-", 7, 300 }, { "prefix=dn-", 1000, 300 },
	};
	for (size_t pass = 0; pass < sizeof(passes) / sizeof(passes[0]); pass++) {
		const char *q = passes[pass].query;

		t0 = mono_ms();
		all = list_locks_all(&d, NULL, q, passes[pass].limit, &pages, &dups, why, sizeof(why));
		CHECK(all, "%s", why);
		printf("# listing %s, %d a page: %zu locks in %d pages, %lld ms\n", q,
		       passes[pass].limit, json_object_size(all), pages, (long long)(mono_ms() - t0));
		CHECK(json_object_size(all) == passes[pass].locks && dups == 0,
		      "%s, %d a page: exactly the %zu locks, each once: %zu listed, %d twice", q,
		      passes[pass].limit, passes[pass].locks, json_object_size(all), dups);
		for (int i = 0; i < 9 && pass < 2; i++) {
			snprintf(name, sizeof(name), "lk-%d", i);
			snprintf(path, sizeof(path), "o%d", i);
			CHECK(holder(json_object_get(all, name), path, NULL), "%s held by %s", name,
			      path);
		}
		json_decref(all);
	}
	CHECK(status_of(&d, "GET", "/healthz") == 200, "dlockd is fine");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	redis_stop(&rs, false);
}

TEST(list_needs_a_token_covering_the_prefix)
{
	char file[300], scope[200], q[300];
	const char *flags[] = { "--auth-file", file, NULL };
	const char *p = lockname("scope");
	struct dlockd_srv d;
	struct http_resp r;
	char why[600];
	int pages, dups;
	json_t *all, *e;
	FILE *f;

	snprintf(file, sizeof(file), "%s/list-tokens", test_tmpdir());
	f = fopen(file, "w");
	CHECK(f, "write the token file");
	fprintf(f, "tok-list-admin admin * lister\ntok-list-a client %s-a- team-a\ntok-list-any client * anyone\n", p);
	fclose(f);
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --auth-file");
	http_bearer("tok-list-a");
	http_on(d.base, "PUT", "/locks/x?owner=o", NULL, &r);	/* out of its scope */
	http_free(&r);
	snprintf(scope, sizeof(scope), "/locks/%s-a-job?owner=o1", p);
	http_on(d.base, "PUT", scope, NULL, &r);
	http_bearer(NULL);
	CHECK_STATUS(r, 200, "a lock in the client's scope");
	http_free(&r);

	http_on(d.base, "GET", "/locks", NULL, &r);
	CHECK_ERROR(r, 401, "unauthorized", "no token");
	http_free(&r);
	snprintf(q, sizeof(q), "prefix=%s-a-", p);
	all = list_locks_all(&d, "tok-list-a", q, 10, &pages, &dups, why, sizeof(why));
	CHECK(all, "its own prefix: %s", why);
	snprintf(scope, sizeof(scope), "%s-a-job", p);
	e = json_object_get(all, scope);
	CHECK(json_object_size(all) == 1 && e &&
	      json_integer_value(json_object_get(json_array_get(json_object_get(e, "holders"), 0),
						 "holds")) == 1 && !holder(e, "o1", NULL),
	      "a client token sees the holds, not the owners: %s", json_dumps(all, JSON_COMPACT));
	json_decref(all);
	snprintf(q, sizeof(q), "prefix=%s-a-jo", p);
	all = list_locks_all(&d, "tok-list-a", q, 10, &pages, &dups, why, sizeof(why));
	CHECK(all && json_object_size(all) == 1, "a longer prefix is covered too: %s", why);
	json_decref(all);
	snprintf(q, sizeof(q), "/locks?prefix=%s-", p);
	http_bearer("tok-list-a");
	http_on(d.base, "GET", q, NULL, &r);
	CHECK_ERROR(r, 403, "forbidden", "a shorter prefix is not");
	http_free(&r);
	http_on(d.base, "GET", "/locks", NULL, &r);
	http_bearer(NULL);
	CHECK_ERROR(r, 403, "forbidden", "nor is every name");
	http_free(&r);
	snprintf(q, sizeof(q), "prefix=%s-a-", p);
	all = list_locks_all(&d, "tok-list-admin", q, 10, &pages, &dups, why, sizeof(why));
	CHECK(all && holds_of(json_object_get(all, scope), "o1", NULL) == 1,
	      "an admin token sees the owners: %s", why);
	json_decref(all);
	all = list_locks_all(&d, "tok-list-any", q, 10, &pages, &dups, why, sizeof(why));
	CHECK(all && json_object_get(all, scope) && !holder(json_object_get(all, scope), "o1", NULL),
	      "a client token for every name sees no owners: %s", why);
	json_decref(all);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	rcmd_int("DEL %s", scope);
}

TEST(list_refuses_bad_parameters)
{
	static const char *const bad[] = {
		"limit=0", "limit=1001", "limit=x", "limit=-1", "limit=", "cursor=abc",
		"cursor=", "cursor=12:", "cursor=12:bad%20name", "cursor=-1",
		"cursor=18446744073709551616", "cursor=123456789012345678901", "prefix=bad%20x",
		"prefix=a&prefix=b", "owner=w1", "force=true",
	};
	struct http_resp r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[200];

		snprintf(path, sizeof(path), "/locks?%s", bad[i]);
		http("GET", path, NULL, &r);
		CHECK_ERROR(r, 400, "invalid_argument", bad[i]);
		http_free(&r);
	}
	http("GET", "/locks?limit=1000&cursor=18446744073709551615", NULL, &r);
	CHECK_STATUS(r, 200, "the largest limit and cursor");
	http_free(&r);
	http("POST", "/locks", NULL, &r);
	CHECK_ERROR(r, 405, "method_not_allowed", "POST /locks");
	CHECK(!strcmp(r.allow, "GET, HEAD"), "Allow: %s", r.allow);
	http_free(&r);
}

TEST(list_when_redis_cannot_serve)
{
	struct redis_srv rs = { .extra = "--rename-command SCAN NOSCAN-9f2" };
	struct dlockd_srv d;
	struct http_resp r;

	CHECK(redis_start(&rs) == 0, "start a Redis without SCAN");
	CHECK(dlockd_start_on(&d, &rs, NULL) == 0, "start dlockd");
	CHECK(status_of(&d, "PUT", "/locks/a?owner=o") == 200, "a lock");
	http_on(d.base, "GET", "/locks", NULL, &r);
	CHECK_ERROR(r, 500, "internal", "SCAN refused");
	http_free(&r);
	CHECK(file_lines_with(d.log, "SCAN failed", "unknown command", NULL) == 1,
	      "logged with Redis' words");
	CHECK(status_of(&d, "GET", "/locks/a") == 200, "dlockd goes on");
	redis_stop(&rs, true);
	http_on(d.base, "GET", "/locks", NULL, &r);
	CHECK_ERROR(r, 503, "backend_unavailable", "Redis down");
	CHECK(atoi(r.retry_after) >= 1, "with Retry-After: '%s'", r.retry_after);
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
}
