/* test_idempotent.c -- retries are safe: a PUT by the owner that holds the
 * lock repeats its grant (same fencing token, same holds, lease the longer
 * of the two), reentrant=true counts holds instead, a DELETE repeated after
 * the lock is free is 409 not_held and changes nothing; for every kind,
 * both sides of a read-write lock included. Also the holders' hash
 * dlockd_lock_owners:{N} that keeps each holding's token. */
#include "../harness/harness.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The four ways to hold a name, as resources. */
static const struct side {
	const char *label;
	const char *fmt;	/* the resource of lock %s */
	const char *field;	/* the owner's field in the lock hash: %s the owner */
} sides[] = {
	{ "lock", "/locks/%s", "%s" },
	{ "fair lock", "/fairlocks/%s", "%s" },
	{ "read lock", "/rwlocks/%s/read", "%s" },
	{ "write lock", "/rwlocks/%s/write", "%s:write" },
};

#define NSIDES (sizeof(sides) / sizeof(sides[0]))

static char pathbuf[600];

/* The side's resource of lock n, with "?query" when query is not NULL. */
static const char *res(const struct side *s, const char *n, const char *query)
{
	int len = snprintf(pathbuf, sizeof(pathbuf), s->fmt, n);

	if (query)
		snprintf(pathbuf + len, sizeof(pathbuf) - (size_t)len, "?%s", query);
	return pathbuf;
}

/* owner's hold count in lock n on side s, as Redis has it (0: none). */
static long long holds_in_redis(const struct side *s, const char *n, const char *owner)
{
	char field[200];

	snprintf(field, sizeof(field), s->field, owner);
	return rcmd_int("HGET %s %s", n, field);
}

/* PUT query on side s of lock n: the grant's fencing token, or -1 (the
 * answer printed) when it was not granted. */
static long long take(const struct side *s, const char *n, const char *query)
{
	struct http_resp r;
	long long token = -1;

	req("PUT", res(s, n, query), &r);
	if (r.status == 200)
		token = json_int(&r, "fencing_token");
	else
		printf("# %s: PUT %s: %ld %s\n", s->label, query, r.status, r.body ? r.body : "");
	http_free(&r);
	return token;
}

/* Send "PUT path" on a connection of its own, wait until its whole answer
 * has arrived, and hang up without reading it: a client whose read timed
 * out, or whose connection broke after dlockd answered. Returns the
 * answer's fencing token, peeked at for the test's own bookkeeping (the
 * client never learns it), or -1. */
static long long put_and_drop_the_answer(const char *path)
{
	char rq[800], buf[4096];
	int fd = raw_connect(H_dlockd.port);
	int64_t until = mono_ms() + 5000 * slow_factor();
	long long token = -1;
	ssize_t n = 0;

	if (fd < 0)
		return -1;
	snprintf(rq, sizeof(rq), "PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
		 path);
	if (write(fd, rq, strlen(rq)) != (ssize_t)strlen(rq)) {
		close(fd);
		return -1;
	}
	while (mono_ms() < until) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		const char *body;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, MSG_PEEK);
		if (n <= 0)
			break;
		buf[n] = '\0';
		body = strstr(buf, "\r\n\r\n");
		if (body && strchr(body, '}')) {
			json_t *j = json_loads(body + 4, JSON_DISABLE_EOF_CHECK, NULL);

			if (j && json_is_integer(json_object_get(j, "fencing_token")))
				token = json_integer_value(json_object_get(j, "fencing_token"));
			json_decref(j);
			break;
		}
		sleep_ms(5);	/* the rest of a partly arrived answer */
	}
	close(fd);		/* unread: the answer is lost */
	return token;
}

/* The scenario of issue 16: a PUT whose answer is lost is retried. The
 * retry gets the same token and holds 1, so one DELETE frees the lock, and
 * a DELETE repeated after that is 409 not_held. (Before, the retry
 * re-entered: holds 2, a new token, and the lock stayed held for its whole
 * lease after the client's one DELETE.) */
TEST(retried_put_whose_answer_was_lost_leaves_one_hold)
{
	for (size_t i = 0; i < NSIDES; i++) {
		const struct side *s = &sides[i];
		const char *n = lockname("lostput");
		struct http_resp r;
		long long first;

		first = put_and_drop_the_answer(res(s, n, "owner=w1&ttl_ms=60000"));
		CHECK(first > 0, "%s: the first PUT was granted and answered", s->label);
		CHECK(holds_in_redis(s, n, "w1") == 1, "%s: the first PUT holds", s->label);

		req("PUT", res(s, n, "owner=w1&ttl_ms=60000"), &r);
		CHECK_STATUS(r, 200, s->label);
		CHECK(json_int(&r, "fencing_token") == first && json_int(&r, "holds") == 1,
		      "%s: the retry gets the same token (%lld) and one hold: %s", s->label, first,
		      r.body);
		http_free(&r);
		CHECK(holds_in_redis(s, n, "w1") == 1, "%s: one hold in Redis", s->label);

		req("DELETE", res(s, n, "owner=w1"), &r);
		CHECK(r.status == 200 && json_bool(&r, "released") == 1 && json_int(&r, "holds") == 0,
		      "%s: one DELETE frees it: %s", s->label, r.body);
		http_free(&r);
		CHECK(rcmd_int("EXISTS %s", n) == 0, "%s: the lock hash is gone", s->label);
		CHECK(rcmd_int("EXISTS dlockd_lock_owners:{%s}", n) == 0,
		      "%s: and so is its holders' hash", s->label);

		req("DELETE", res(s, n, "owner=w1"), &r);
		CHECK_ERROR(r, 409, "not_held", s->label);
		http_free(&r);
		CHECK(rcmd_int("EXISTS %s", n) == 0, "%s: a repeated DELETE changes nothing",
		      s->label);
	}
}

/* A repeat never shortens the lease and extends it to ttl_ms when that is
 * longer; the holders' hash lives exactly as long as the lock hash. */
TEST(repeated_put_keeps_token_and_holds_and_takes_the_longer_lease)
{
	for (size_t i = 0; i < NSIDES; i++) {
		const struct side *s = &sides[i];
		const char *n = lockname("repeat");
		long long token = take(s, n, "owner=w1&ttl_ms=60000");
		struct http_resp r;

		CHECK(token > 0, "%s: granted", s->label);
		req("PUT", res(s, n, "owner=w1&ttl_ms=1000"), &r);
		CHECK(r.status == 200 && json_int(&r, "fencing_token") == token &&
		      json_int(&r, "holds") == 1 && json_int(&r, "ttl_ms") > 59000,
		      "%s: a shorter repeat keeps the lease: %s", s->label, r.body);
		http_free(&r);
		req("PUT", res(s, n, "owner=w1&ttl_ms=120000"), &r);
		CHECK(r.status == 200 && json_int(&r, "fencing_token") == token &&
		      json_int(&r, "holds") == 1 && json_int(&r, "ttl_ms") > 119000,
		      "%s: a longer repeat extends it: %s", s->label, r.body);
		http_free(&r);
		CHECK(rcmd_int("PTTL %s", n) > 119000, "%s: in Redis", s->label);
		CHECK(llabs(rcmd_int("PTTL dlockd_lock_owners:{%s}", n) - rcmd_int("PTTL %s", n)) < 50,
		      "%s: the holders' hash has the lock's lease", s->label);
		if (i == 2)
			CHECK(rcmd_int("PTTL {%s}:w1:rwlock_timeout:1", n) > 119000,
			      "the read hold itself lasts as long");
		CHECK(req("DELETE", res(s, n, "owner=w1"), NULL) == 200, "%s: release", s->label);
		CHECK(rcmd_int("EXISTS %s", n) == 0, "%s: one DELETE frees it", s->label);
	}
}

/* reentrant=true counts holds (Redisson's RLock), under the holding's one
 * token; each DELETE releases one; then not_held. */
TEST(reentrant_true_counts_holds_under_one_token)
{
	for (size_t i = 0; i < NSIDES; i++) {
		const struct side *s = &sides[i];
		const char *n = lockname("reent");
		long long token = take(s, n, "owner=w1&ttl_ms=60000&reentrant=false");
		struct http_resp r;

		CHECK(token > 0, "%s: granted", s->label);
		http("PUT", res(s, n, NULL), "{\"owner\":\"w1\",\"reentrant\":true}", &r);
		CHECK(r.status == 200 && json_int(&r, "holds") == 2 &&
		      json_int(&r, "fencing_token") == token,
		      "%s: a re-entry adds a hold, same token: %s", s->label, r.body);
		http_free(&r);
		CHECK(holds_in_redis(s, n, "w1") == 2, "%s: two holds in Redis", s->label);
		req("PUT", res(s, n, "owner=w1"), &r);
		CHECK(r.status == 200 && json_int(&r, "holds") == 2,
		      "%s: a repeat after it still adds none: %s", s->label, r.body);
		http_free(&r);

		req("DELETE", res(s, n, "owner=w1"), &r);
		CHECK(r.status == 200 && json_int(&r, "holds") == 1 && json_bool(&r, "released") == 0,
		      "%s: one DELETE, one hold: %s", s->label, r.body);
		http_free(&r);
		req("DELETE", res(s, n, "owner=w1"), &r);
		CHECK(r.status == 200 && json_bool(&r, "released") == 1, "%s: free: %s", s->label,
		      r.body);
		http_free(&r);
		req("DELETE", res(s, n, "owner=w1"), &r);
		CHECK_ERROR(r, 409, "not_held", s->label);
		http_free(&r);
	}
}

TEST(reentrant_takes_true_or_false_only)
{
	const char *n = lockname("reentbad");
	struct http_resp r;

	req("PUT", res(&sides[0], n, "owner=w1&reentrant=yes"), &r);
	CHECK_ERROR(r, 400, "invalid_argument", "reentrant=yes");
	CHECK(strstr(json_str(&r, "message"), "reentrant 'yes' is not true or false"), "%s", r.body);
	http_free(&r);
	http("PUT", res(&sides[0], n, NULL), "{\"owner\":\"w1\",\"reentrant\":1}", &r);
	CHECK_ERROR(r, 400, "invalid_argument", "reentrant: 1 in a body");
	http_free(&r);
	req("DELETE", res(&sides[0], n, "owner=w1&reentrant=true"), &r);
	CHECK_ERROR(r, 400, "invalid_argument", "reentrant is for PUT only");
	http_free(&r);
	CHECK(rcmd_int("EXISTS %s", n) == 0, "nothing was taken");
}

/* A holders' hash that is not a hash is data dlockd did not put there:
 * wrong_kind, and nothing is written, whatever the operation. */
TEST(holders_hash_of_another_type_is_refused_untouched)
{
	for (size_t i = 0; i < NSIDES; i++) {
		const struct side *s = &sides[i];
		const char *n = lockname("ownersbad");
		const char *h = lockname("ownersbad-held");
		struct http_resp r;

		rcmd_int("SET dlockd_lock_owners:{%s} x", n);
		req("PUT", res(s, n, "owner=w1"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", s->label);
		http_free(&r);
		CHECK(rcmd_int("EXISTS %s", n) == 0, "%s: nothing taken", s->label);

		CHECK(take(s, h, "owner=w1&ttl_ms=60000") > 0, "%s: held", s->label);
		rcmd_int("DEL dlockd_lock_owners:{%s}", h);
		rcmd_int("SET dlockd_lock_owners:{%s} x", h);
		req("DELETE", res(s, h, "owner=w1"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", s->label);
		http_free(&r);
		req("DELETE", res(s, h, "force=true"), &r);
		CHECK_ERROR(r, 409, "wrong_kind", s->label);
		http_free(&r);
		CHECK(holds_in_redis(s, h, "w1") == 1, "%s: left as it was", s->label);
		rcmd_int("DEL %s dlockd_lock_owners:{%s} dlockd_lock_owners:{%s}", h, h, n);
	}
}

/* A free lock's holders' hash left with stale entries (Redisson or a forced
 * release dropped the lock hash alone; here one with no TTL at all): the
 * grant writes its entry over the stale one in its first write (the HSET
 * that is also the type check), so the new holding has its own token and
 * change number, no stale value, a holders' hash that ends with its lease,
 * and nothing left once it is released. */
TEST(stale_holders_entry_of_a_free_lock_is_overwritten_whole)
{
	for (size_t i = 0; i < NSIDES; i++) {
		const struct side *s = &sides[i];
		const char *n = lockname("ownersstale");
		char field[200];
		long long token;
		redisReply *rep;

		snprintf(field, sizeof(field), s->field, "w1");
		rcmd_int("HSET dlockd_lock_owners:{%s} %s %s #%s %s =%s %s ghost 7", n, field,
			 "5 team-x", field, "9 1 0 0", field, "stale-value");
		token = take(s, n, "owner=w1&ttl_ms=60000");
		CHECK(token > 9, "%s: granted, a token of its own", s->label);
		rep = rcmd("HGET dlockd_lock_owners:{%s} %s", n, field);
		CHECK(rep && rep->type == REDIS_REPLY_STRING && atoll(rep->str) == token &&
		      !strchr(rep->str, ' '), "%s: the entry is the grant's: %s", s->label,
		      rep && rep->str ? rep->str : "-");
		freeReplyObject(rep);
		rep = rcmd("HGET dlockd_lock_owners:{%s} #%s", n, field);
		CHECK(rep && rep->type == REDIS_REPLY_STRING && atoll(rep->str) > 9,
		      "%s: a new change number: %s", s->label, rep && rep->str ? rep->str : "-");
		freeReplyObject(rep);
		CHECK(rcmd_int("HEXISTS dlockd_lock_owners:{%s} =%s", n, field) == 0,
		      "%s: no stale value", s->label);
		CHECK(rcmd_int("PTTL dlockd_lock_owners:{%s}", n) > 0 &&
		      rcmd_int("PTTL dlockd_lock_owners:{%s}", n) <= 60000,
		      "%s: the holders' hash ends with the lease", s->label);
		CHECK(take(s, n, "owner=w1&ttl_ms=60000") == token, "%s: a repeat, same token",
		      s->label);
		CHECK(req("DELETE", res(s, n, "owner=w1"), NULL) == 200, "%s: released", s->label);
		CHECK(rcmd_int("EXISTS %s dlockd_lock_owners:{%s}", n, n) == 0, "%s: nothing left",
		      s->label);

		/* the same with a value given: it replaces the stale one */
		rcmd_int("HSET dlockd_lock_owners:{%s} %s %s =%s %s", n, field, "5", field, "stale");
		CHECK(take(s, n, "owner=w1&ttl_ms=60000&value=mine") > 0, "%s: granted", s->label);
		rep = rcmd("HGET dlockd_lock_owners:{%s} =%s", n, field);
		CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "mine"),
		      "%s: the value given", s->label);
		freeReplyObject(rep);
		CHECK(req("DELETE", res(s, n, "owner=w1"), NULL) == 200, "%s: released", s->label);
		CHECK(rcmd_int("EXISTS %s dlockd_lock_owners:{%s}", n, n) == 0, "%s: nothing left",
		      s->label);
	}
}

/* The holders' hash: one field per holding, named as in the lock hash,
 * value the holding's token ("<token> <name>" under auth: test_auth.c),
 * and one '#'-field per holding with the number of its last change (what
 * an undo checks: test_sync_replicas.c). */
TEST(holders_hash_keeps_each_holdings_token)
{
	const char *n = lockname("owners");
	const char *rw = lockname("owners-rw");
	struct http_resp r;
	redisReply *rep;
	long long wt, rt;
	char want[40];

	req("PUT", res(&sides[0], n, "owner=w1&ttl_ms=20000"), &r);
	snprintf(want, sizeof(want), "%lld", json_int(&r, "fencing_token"));
	http_free(&r);
	rep = rcmd("HGET dlockd_lock_owners:{%s} w1", n);
	CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, want),
	      "w1's entry is its token %s", want);
	freeReplyObject(rep);
	CHECK(rcmd_int("HLEN %s", n) == 1, "the lock hash is Redisson's: one field, the count");
	snprintf(pathbuf, sizeof(pathbuf), "/locks/%s/heartbeat?owner=w1&ttl_ms=90000", n);
	CHECK(req("POST", pathbuf, NULL) == 200, "heartbeat");
	CHECK(llabs(rcmd_int("PTTL dlockd_lock_owners:{%s}", n) - rcmd_int("PTTL %s", n)) < 50 &&
	      rcmd_int("PTTL %s", n) > 89000, "a heartbeat moves both leases");
	CHECK(req("DELETE", res(&sides[0], n, "force=true"), NULL) == 200, "forced");
	CHECK(rcmd_int("EXISTS dlockd_lock_owners:{%s}", n) == 0, "a forced release drops it");

	/* a writer that also reads holds two holdings, each with its token */
	req("PUT", res(&sides[3], rw, "owner=w&ttl_ms=20000"), &r);
	wt = json_int(&r, "fencing_token");
	http_free(&r);
	req("PUT", res(&sides[2], rw, "owner=w&ttl_ms=20000"), &r);
	rt = json_int(&r, "fencing_token");
	CHECK(r.status == 200 && json_int(&r, "holds") == 1 && rt > wt,
	      "the writer's first read is a holding of its own, with its own token: %s", r.body);
	http_free(&r);
	req("PUT", res(&sides[2], rw, "owner=w"), &r);
	CHECK(json_int(&r, "fencing_token") == rt && json_int(&r, "holds") == 1,
	      "and its repeat is a repeat: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("HLEN dlockd_lock_owners:{%s}", rw) == 4 &&
	      rcmd_int("HGET dlockd_lock_owners:{%s} w:write", rw) == wt &&
	      rcmd_int("HGET dlockd_lock_owners:{%s} w", rw) == rt &&
	      rcmd_int("HEXISTS dlockd_lock_owners:{%s} #w:write", rw) == 1 &&
	      rcmd_int("HEXISTS dlockd_lock_owners:{%s} #w", rw) == 1,
	      "fields w:write and w, and their change numbers #w:write and #w");
	CHECK(req("DELETE", res(&sides[3], rw, "owner=w"), NULL) == 200, "downgrade");
	CHECK(rcmd_int("HEXISTS dlockd_lock_owners:{%s} w:write", rw) == 0 &&
	      rcmd_int("HEXISTS dlockd_lock_owners:{%s} #w:write", rw) == 0 &&
	      rcmd_int("HGET dlockd_lock_owners:{%s} w", rw) == rt, "the write entry went");
	snprintf(pathbuf, sizeof(pathbuf), "/rwlocks/%s", rw);
	req("GET", pathbuf, &r);
	CHECK(!strcmp(json_str(&r, "mode"), "read"), "read mode now: %s", r.body);
	http_free(&r);
	CHECK(req("DELETE", res(&sides[2], rw, "owner=w"), NULL) == 200, "last read");
	CHECK(rcmd_int("EXISTS dlockd_lock_owners:{%s}", rw) == 0, "gone with the lock");
}

/* An entry whose field the lock hash no longer has is stale: a new
 * holding with that field gets a new token, not the entry's. A holding
 * dlockd did not grant (Redisson's) has no entry: its first repeat through
 * dlockd gets a token, kept from then on. */
TEST(stale_holder_entries_are_ignored_and_overwritten)
{
	const char *n = lockname("stale");
	const char *j = lockname("java");
	struct http_resp r;
	redisReply *rep;
	long long token;

	rcmd_int("HSET dlockd_lock_owners:{%s} w1 5", n);
	rcmd_int("PEXPIRE dlockd_lock_owners:{%s} 60000", n);
	req("PUT", res(&sides[0], n, "owner=w1"), &r);
	CHECK(r.status == 200 && json_int(&r, "fencing_token") > 1000000,
	      "a new holding gets a new token, not the stale 5: %s", r.body);
	token = json_int(&r, "fencing_token");
	http_free(&r);
	CHECK(rcmd_int("HGET dlockd_lock_owners:{%s} w1", n) == token, "and records it");
	CHECK(lock_release(NULL, n, "w1") == 200, "released");

	rep = rcmd("EVAL %s 1 %s %s %s", redisson_acquire, j, "60000", "java-1");
	CHECK(rep && rep->type == REDIS_REPLY_NIL, "a Redisson client holds it");
	freeReplyObject(rep);
	req("PUT", res(&sides[0], j, "owner=java-1"), &r);
	CHECK(r.status == 200 && json_int(&r, "holds") == 1, "its owner id repeats: %s", r.body);
	token = json_int(&r, "fencing_token");
	http_free(&r);
	req("PUT", res(&sides[0], j, "owner=java-1"), &r);
	CHECK(json_int(&r, "fencing_token") == token, "same token from then on: %s", r.body);
	http_free(&r);
	CHECK(lock_release(NULL, j, "java-1") == 200, "released");
	CHECK(rcmd_int("EXISTS %s", j) == 0 && rcmd_int("EXISTS dlockd_lock_owners:{%s}", j) == 0,
	      "nothing left");
}

/* A repeat whose answer cannot be delivered added no hold, so nothing is
 * released: the holding the client learnt of by its first answer stays.
 * (A fresh grant nobody learns of is released: test_wait.c.) */
TEST(undelivered_repeat_keeps_the_holding)
{
	const char *n = lockname("undeliv");
	struct dlockd_srv d;
	char rq[600], p[400];
	struct http_resp r;
	int fd;

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "a dlockd with a log of its own");
	snprintf(p, sizeof(p), "/locks/%s?owner=w1&ttl_ms=30000", n);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_STATUS(r, 200, "w1 holds");
	http_free(&r);
	fd = raw_connect(d.port);
	CHECK(fd >= 0, "connect");
	snprintf(rq, sizeof(rq), "PUT /locks/%s?owner=w1&ttl_ms=90000 HTTP/1.1\r\n"
		 "Host: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", n);
	/* corked: the request and the FIN leave together (see test_wait.c) */
	setsockopt(fd, IPPROTO_TCP, TCP_CORK, &(int){ 1 }, sizeof(int));
	CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq), "send");
	shutdown(fd, SHUT_WR);
	CHECK(WAIT_FOR(file_contains(d.log, "\"delivered\":false"), 5000),
	      "the repeat ran and its answer was not delivered");
	close(fd);
	CHECK(rcmd_int("PTTL %s", n) > 60000, "the repeat extended the lease");
	snprintf(p, sizeof(p), "/locks/%s?owner=w1", n);
	http_on(d.base, "GET", p, NULL, &r);
	CHECK(json_bool(&r, "held") == 1 && json_int(&r, "holds") == 1,
	      "w1 still holds its one hold: %s", r.body);
	http_free(&r);
	CHECK(!file_contains(d.log, "was not delivered; taking it back"), "nothing was taken back");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	CHECK(rcmd_int("HGET %s w1", n) == 1, "still held after dlockd stopped");
	rcmd_int("DEL %s dlockd_lock_owners:{%s}", n, n);
}

/* Two identical waiting PUTs of one owner -- a client that retried while
 * its first request still waited (behind a proxy that kept the first
 * connection open, or with a read timeout shorter than wait_ms): once the
 * lock is free one is granted, and the other is answered the same grant at
 * once, not at its wait_ms (25 s here) nor at the lease end. On one event
 * loop (--threads 1), where a release wakes one sleeper, and on two. */
TEST(second_waiting_put_of_an_owner_gets_the_first_ones_grant_at_once)
{
	static const char *const threads[] = { "1", "2" };

	for (size_t t = 0; t < 2; t++) {
		const char *flags[] = { "--threads", threads[t], NULL };
		struct dlockd_srv d;

		CHECK(dlockd_start(&d, NULL, flags) == 0, "start dlockd --threads %s", threads[t]);
		for (size_t i = 0; i < NSIDES; i++) {
			const struct side *s = &sides[i];
			/* what blocks it: a reader waits for a writer */
			const struct side *block = !strcmp(s->label, "read lock") ? &sides[3] : s;
			const char *n = lockname("twice");
			struct bg a, b;
			long long s0;
			int64_t t0;

			CHECK(status_of(&d, "PUT", "%s", res(block, n, "owner=h&ttl_ms=60000")) == 200,
			      "%s: h holds it", s->label);
			s0 = redis_scripts_called();
			bg_start_on(&a, d.base, "PUT", res(s, n, "owner=w1&ttl_ms=60000&wait_ms=25000"),
				    NULL);
			bg_start_on(&b, d.base, "PUT", res(s, n, "owner=w1&ttl_ms=60000&wait_ms=25000"),
				    NULL);
			CHECK(wait_parked(&d, 2, s0, 10000, NULL), "%s: both wait", s->label);
			t0 = mono_ms();
			CHECK(status_of(&d, "DELETE", "%s", res(block, n, "owner=h")) == 200,
			      "%s: h releases", s->label);
			bg_join(&a);
			bg_join(&b);
			CHECK(a.r.status == 200 && b.r.status == 200,
			      "%s: both granted: %ld %s / %ld %s", s->label, a.r.status, a.r.body,
			      b.r.status, b.r.body);
			CHECK(json_int(&a.r, "fencing_token") == json_int(&b.r, "fencing_token") &&
			      json_int(&a.r, "holds") == 1 && json_int(&b.r, "holds") == 1,
			      "%s: one grant, told twice: %s / %s", s->label, a.r.body, b.r.body);
			CHECK(a.done_ms - t0 < 10000 && b.done_ms - t0 < 10000,
			      "%s, %s threads: both answered soon after the release, not at wait_ms: "
			      "%lld / %lld ms", s->label, threads[t], (long long)(a.done_ms - t0),
			      (long long)(b.done_ms - t0));
			http_free(&a.r);
			http_free(&b.r);
			CHECK(holds_in_redis(s, n, "w1") == 1, "%s: one hold in Redis", s->label);
			CHECK(status_of(&d, "DELETE", "%s", res(s, n, "owner=w1")) == 200 &&
			      rcmd_int("EXISTS %s", n) == 0, "%s: one DELETE frees it", s->label);
		}
		CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	}
}
