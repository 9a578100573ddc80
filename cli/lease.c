/* lease.c -- one lock as dlock holds it (see lease.h): the requests of the
 * lock's kind, what their answers mean, and the patience dlock has with
 * a dlockd that is failing over or restarting. A lease held some other
 * way (several names, session.c) is handed to its lease_ops. */
#include "lease.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The longest long poll: a dlockd set lower answers 400 and dlock halves
 * it until it is taken. */
#define WAIT_CHUNK_MS LEASE_WAIT_CHUNK_MS
/* How long dlockd may be unreachable or answer 5xx in a row before dlock
 * gives up on a request (it waits for Retry-After, or 250 ms growing to
 * 2 s, in between): a restart or a Redis failover takes less. */
#define RETRY_FOR_MS 10000
#define SLACK_MS LEASE_SLACK_MS

int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *lease_kind_name(enum lease_kind kind)
{
	static const char *const names[] = { "lock", "fairlock", "rwlock", "rwlock", "semaphore" };

	return names[kind];
}

const char *lease_mode_name(enum lease_kind kind)
{
	return kind == KIND_READ ? "read" : kind == KIND_WRITE ? "write" : NULL;
}

bool lease_id_ok(const char *s, size_t max)
{
	size_t len = strlen(s);

	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == ':' || ch == '-'))
			return false;
	}
	return true;
}

void lease_make_owner(char *owner)
{
	unsigned char rnd[8] = { 0 };
	char host[64] = "";
	FILE *f = fopen("/dev/urandom", "rb");
	size_t n = 0;

	if (f) {
		n = fread(rnd, 1, sizeof(rnd), f);
		fclose(f);
	}
	if (n != sizeof(rnd)) {	/* no /dev/urandom: the clock and pid still differ */
		uint64_t t = (uint64_t)mono_ms() ^ ((uint64_t)time(NULL) << 20);

		memcpy(rnd, &t, sizeof(rnd));
	}
	gethostname(host, sizeof(host) - 1);
	for (char *p = host; *p; p++)	/* only what an owner id may hold */
		if (!lease_id_ok((char[]){ *p, '\0' }, 1))
			*p = '-';
	snprintf(owner, 129, "dlock-%.60s%s%d-%02x%02x%02x%02x%02x%02x%02x%02x", host,
		 host[0] ? "-" : "", (int)getpid(), rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
		 rnd[5], rnd[6], rnd[7]);
}

/* ----- Answers ----- */

void lease_say(const struct lease *l, const char *fmt, ...)
{
	static const char *const what[] = { "lock", "fair lock", "read lock", "write lock",
					    "semaphore" };
	va_list ap;

	fprintf(stderr, "dlock: %s '%s': ", what[l->kind], l->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

enum lease_outcome lease_outcome_of(const struct answer *a)
{
	const char *code = answer_code(a);

	if (a->status == 200)
		return LEASE_OK;
	if (a->status == 409 && !strcmp(code, "locked"))
		return LEASE_CONFLICT;
	if (a->status == 409 && (!strcmp(code, "not_held") || !strcmp(code, "not_owner")))
		return LEASE_LOST;
	if (a->status == 404 && !strcmp(code, "session_not_found"))
		return LEASE_LOST;	/* a session's: it has ended */
	if (a->status == 401 || a->status == 403 || a->status == 409)
		return LEASE_REFUSED;
	if (a->status >= 400 && a->status < 500)
		return LEASE_INVALID;
	return LEASE_UNAVAILABLE;
}

int lease_exit_code(enum lease_outcome out, int conflict_exit)
{
	switch (out) {
	case LEASE_OK: return 0;
	case LEASE_CONFLICT: return conflict_exit;
	case LEASE_LOST: return EXIT_LOST;
	case LEASE_REFUSED: return EXIT_REFUSED;
	case LEASE_INVALID: return EXIT_USAGE;
	default: return EXIT_UNAVAILABLE;
	}
}

const char *lease_hint(const struct answer *a)
{
	if (a->status == 401)
		return " (give dlock the token with --token-file FILE, or DLOCKD_TOKEN=TOKEN or "
		       "DLOCKD_TOKEN_FILE=FILE in its environment)";
	if (a->status == 0)
		return " (point dlock at another dlockd with --server URL or DLOCKD_URL=URL)";
	return "";
}

void lease_say_answer(const struct lease *l, const char *doing, const struct answer *a)
{
	if (a->status == 0)
		lease_say(l, "%s: cannot reach dlockd at %s: %s%s", doing, client_server(l->client),
		    a->error, lease_hint(a));
	else if (*answer_message(a))
		lease_say(l, "%s: dlockd answered %ld %s: %s%s", doing, a->status, answer_code(a),
		    answer_message(a), lease_hint(a));
	else
		lease_say(l, "%s: dlockd at %s answered %ld%s", doing, client_server(l->client),
		    a->status, lease_hint(a));
}

/* The lock's path, then op ("" or "/heartbeat"), then the query. */
static void lock_path(const struct lease *l, const char *op, char *path, size_t len)
{
	static const char *const fmt[] = { "/locks/%s%s", "/fairlocks/%s%s",
					   "/rwlocks/%s/read%s", "/rwlocks/%s/write%s",
					   "/semaphores/%s%s" };

	snprintf(path, len, fmt[l->kind], l->name, op);
}

void lease_status_path(const struct lease *l, char *path, size_t len)
{
	static const char *const fmt[] = { "/locks/%s", "/fairlocks/%s", "/rwlocks/%s",
					   "/rwlocks/%s", "/semaphores/%s" };

	snprintf(path, len, fmt[l->kind], l->name);
}

/* What an acquire adds to its query: a semaphore's limit, the holder
 * value (escaped), reentrant=true for a shared owner id (a semaphore's
 * repeat is the same permit: it takes none). The caller frees it. */
static char *acquire_extras(const struct lease *l)
{
	size_t n = l->value ? strlen(l->value) : 0, at = 0;
	char *s = malloc(3 * n + 64);

	if (!s)
		return NULL;
	if (l->kind == KIND_SEMAPHORE)
		at += (size_t)sprintf(s + at, "&limit=%d", l->limit);
	else if (l->owner_given)
		at += (size_t)sprintf(s + at, "&reentrant=true");
	if (l->value) {
		at += (size_t)sprintf(s + at, "&value=");
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)l->value[i];

			if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~')
				s[at++] = (char)c;
			else
				at += (size_t)sprintf(s + at, "%%%02X", c);
		}
	}
	s[at] = '\0';
	return s;
}

/* Is a signal waiting on sigfd? */
static bool signalled(int sigfd)
{
	struct pollfd p = { .fd = sigfd, .events = POLLIN };

	return sigfd >= 0 && poll(&p, 1, 0) > 0;
}

bool lease_pause_ms(int sigfd, int64_t ms)
{
	struct pollfd p = { .fd = sigfd, .events = POLLIN };

	if (ms <= 0)
		return true;
	return poll(&p, sigfd >= 0 ? 1 : 0, (int)ms) <= 0;
}

int64_t lease_retry_in(const struct answer *a, int64_t first_fail_ms, int64_t now, int attempt)
{
	int64_t ms = a->retry_after_s > 0 ? a->retry_after_s * 1000LL
					  : (attempt < 3 ? 250LL << attempt : 2000);

	if (now - first_fail_ms >= RETRY_FOR_MS)
		return -1;
	if (ms > RETRY_FOR_MS - (now - first_fail_ms))
		ms = RETRY_FOR_MS - (now - first_fail_ms);
	return ms;
}

/* ----- Acquire ----- */

/* A granted answer's token and lease, counted from when it was asked
 * (sent_ms). LEASE_CONFLICT when the owner held it already: with an owner
 * id given, dlock asks with reentrant=true, so that a second holding of
 * one owner shows as holds > 1 instead of passing for a grant. */
static enum lease_outcome granted(struct lease *l, const struct answer *a, int64_t sent_ms)
{
	json_t *token = json_object_get(a->json, "fencing_token");
	json_t *ttl = json_object_get(a->json, "ttl_ms");
	json_t *holds = json_object_get(a->json, "holds");

	if (!json_is_integer(token) || !json_is_integer(ttl)) {
		lease_say(l, "acquiring: dlockd's answer has no fencing_token or ttl_ms");
		return LEASE_UNAVAILABLE;
	}
	l->fencing_token = json_integer_value(token);
	l->end_ms = sent_ms + json_integer_value(ttl);
	if (l->owner_given && json_integer_value(holds) > 1) {
		lease_say(l, "owner '%s' holds it already (another dlock with this --owner?): "
			  "an owner id must be unique to each run", l->owner);
		lease_release(l, false, true, false);	/* the hold this request added */
		return LEASE_CONFLICT;
	}
	return LEASE_OK;
}

/* After a grant that came long after it was asked (a long poll), the lease
 * began some time in between: renew it at once, so that the lease dlock
 * counts on starts from a known moment. A failing dlockd is retried as an
 * acquire is (10 s); a signal on sigfd stops it. Whatever does not end in
 * a known lease gives the lock back. */
static enum lease_outcome confirm(struct lease *l, int sigfd)
{
	int64_t first_fail = mono_ms();
	enum lease_outcome out;
	int attempt = 0;

	for (;;) {
		int64_t sent = mono_ms(), next;
		struct answer a;

		lease_renew_start(l, (long)(l->ttl_ms / 3 < 10000 ? l->ttl_ms / 3 : 10000));
		while (!client_poll(l->client, sigfd, 1000)) {
			if (signalled(sigfd)) {
				client_abort(l->client);
				lease_release(l, false, true, false);
				return LEASE_INTERRUPTED;
			}
		}
		client_finish(l->client, &a);
		out = lease_renewed(l, &a, sent);
		next = out == LEASE_UNAVAILABLE ? lease_retry_in(&a, first_fail, mono_ms(), attempt++) : -1;
		if (out != LEASE_OK && out != LEASE_LOST && next < 0) {
			lease_say_answer(l, "granted after a wait, but renewing it at once failed, so its "
				   "lease is not known: releasing", &a);
			lease_release(l, false, true, true);
			out = LEASE_UNAVAILABLE;
		}
		answer_release(&a);
		if (next < 0)
			return out;
		if (!lease_pause_ms(sigfd, next)) {
			lease_release(l, false, true, false);
			return LEASE_INTERRUPTED;
		}
	}
}

/* lease_acquire without its -v line. */
static enum lease_outcome acquire(struct lease *l, int64_t wait_ms, int sigfd)
{
	int64_t deadline = wait_ms < 0 ? INT64_MAX : mono_ms() + wait_ms;
	int64_t chunk = WAIT_CHUNK_MS, first_fail = 0;
	enum lease_outcome out = LEASE_CONFLICT;
	int attempt = 0;

	for (;;) {
		int64_t now = mono_ms(), wait = deadline - now, next;
		char path[4096], base[300], *extras;
		struct answer a;

		if (wait < 0)
			wait = 0;
		if (wait > chunk)
			wait = chunk;
		/* while dlockd fails, no poll outlasts the patience left */
		if (first_fail && wait > RETRY_FOR_MS - (now - first_fail))
			wait = RETRY_FOR_MS - (now - first_fail) > 0 ? RETRY_FOR_MS - (now - first_fail)
								     : 0;
		lock_path(l, "", base, sizeof(base));
		extras = acquire_extras(l);
		snprintf(path, sizeof(path), "%s?owner=%s&ttl_ms=%lld&wait_ms=%lld%s", base, l->owner,
			 (long long)l->ttl_ms, (long long)wait, extras ? extras : "");
		free(extras);
		if (!client_call(l->client, "PUT", path, NULL, (long)(wait + SLACK_MS), sigfd,
				 &a)) {
			/* the grant may be on its way: give it back -- unless the
			 * owner id is shared, where a release could take the hold
			 * of another run of that owner if this PUT never arrived
			 * (a grant left behind only lasts its lease) */
			if (!l->owner_given)
				lease_release(l, false, true, false);
			return LEASE_INTERRUPTED;
		}
		out = lease_outcome_of(&a);
		if (out == LEASE_OK)
			out = granted(l, &a, now);
		if (out == LEASE_OK && mono_ms() - now > l->ttl_ms / 10)
			out = confirm(l, sigfd);
		if (out == LEASE_INTERRUPTED) {
			answer_release(&a);
			return out;
		}
		if (out == LEASE_INVALID && chunk > 0 && strstr(answer_message(&a), "wait_ms")) {
			chunk = chunk >= 2000 ? chunk / 2 : 0;	/* dlockd's --max-wait-ms is lower */
			answer_release(&a);
			continue;
		}
		if (a.status == 200 && out != LEASE_OK) {	/* said by granted() or confirm() */
			answer_release(&a);
			return out;
		}
		now = mono_ms();
		if (out == LEASE_CONFLICT) {
			first_fail = 0;
			attempt = 0;
			/* a dlockd that does not wait (--max-wait-ms 0) is polled */
			next = wait > 0 ? 0 : a.retry_after_s > 0 ? a.retry_after_s * 1000LL : 1000;
		} else if (out == LEASE_UNAVAILABLE) {
			if (!first_fail)
				first_fail = now;
			/* the first of a run of failures: say so, and what is tried */
			if (!attempt && now < deadline && a.status == 0)
				lease_say(l, "cannot reach dlockd at %s: %s; retrying for %d s%s",
					  client_server(l->client), a.error, RETRY_FOR_MS / 1000,
					  lease_hint(&a));
			else if (!attempt && now < deadline)
				lease_say(l, "dlockd at %s answered %ld%s%s; retrying for %d s",
					  client_server(l->client), a.status,
					  *answer_code(&a) ? " " : "", answer_code(&a),
					  RETRY_FOR_MS / 1000);
			next = lease_retry_in(&a, first_fail, now, attempt++);
			if (next < 0 || now >= deadline)
				lease_say_answer(l, "acquiring", &a);
		} else {
			if (out != LEASE_OK)
				lease_say_answer(l, "acquiring", &a);
			answer_release(&a);
			return out;
		}
		answer_release(&a);
		if (now >= deadline || next < 0)
			break;
		if (next > deadline - now)
			next = deadline - now;
		if (!lease_pause_ms(sigfd, next))
			return LEASE_INTERRUPTED;
	}
	if (out == LEASE_CONFLICT)
		lease_say(l, "held by another owner: not acquired within the wait");
	return out;
}

enum lease_outcome lease_acquire(struct lease *l, int64_t wait_ms, int sigfd)
{
	int64_t t0 = mono_ms();
	enum lease_outcome out = l->ops ? l->ops->acquire(l, wait_ms, sigfd)
					: acquire(l, wait_ms, sigfd);

	if (out == LEASE_OK && l->verbose && l->fencing_tokens)
		lease_say(l, "acquired after %.3f s, fencing tokens %s, lease %lld ms",
			  (double)(mono_ms() - t0) / 1000, l->fencing_tokens, (long long)l->ttl_ms);
	else if (out == LEASE_OK && l->verbose)
		lease_say(l, "acquired after %.3f s, fencing token %lld, lease %lld ms",
			  (double)(mono_ms() - t0) / 1000, l->fencing_token, (long long)l->ttl_ms);
	return out;
}

/* ----- Renew and release ----- */

void lease_renew_start(struct lease *l, long timeout_ms)
{
	char path[512], base[300];

	if (l->ops) {
		l->ops->renew_start(l, timeout_ms);
		return;
	}
	lock_path(l, "/heartbeat", base, sizeof(base));
	snprintf(path, sizeof(path), "%s?owner=%s&ttl_ms=%lld", base, l->owner,
		 (long long)l->ttl_ms);
	client_start(l->client, "POST", path, NULL, timeout_ms);
}

enum lease_outcome lease_renewed(struct lease *l, struct answer *a, int64_t sent_ms)
{
	enum lease_outcome out = lease_outcome_of(a);
	json_t *ttl = json_object_get(a->json, "ttl_ms");

	if (l->ops)
		return l->ops->renewed(l, a, sent_ms);
	if (out == LEASE_OK && json_is_integer(ttl))
		l->end_ms = sent_ms + json_integer_value(ttl);
	else if (out == LEASE_OK)
		out = LEASE_UNAVAILABLE;
	if (out == LEASE_LOST)
		lease_say_answer(l, "renewing", a);
	return out;
}

void lease_call_patient(const struct lease *l, const char *method, const char *path,
			const char *body, bool patient, struct answer *a)
{
	int64_t first_fail = mono_ms();
	int attempt = 0;

	for (;;) {
		int64_t next;

		client_call(l->client, method, path, body, 5000, -1, a);
		next = patient && lease_outcome_of(a) == LEASE_UNAVAILABLE
			       ? lease_retry_in(a, first_fail, mono_ms(), attempt++) : -1;
		if (next < 0)
			return;
		answer_release(a);
		lease_pause_ms(-1, next);
	}
}

/* DELETE path; forced: a forced release, whose 200 says "released": false
 * when nobody held the lock (not held, as an owner's 409 says). */
static enum lease_outcome delete_call(struct lease *l, const char *path, bool quiet_not_held,
				      bool patient, bool forced)
{
	enum lease_outcome out;
	struct answer a;

	lease_call_patient(l, "DELETE", path, NULL, patient, &a);
	out = lease_outcome_of(&a);
	if (forced && out == LEASE_OK && json_is_false(json_object_get(a.json, "released"))) {
		out = LEASE_LOST;
		if (!quiet_not_held)
			lease_say(l, "releasing: nobody held it");
	} else if (out != LEASE_OK && !(out == LEASE_LOST && quiet_not_held)) {
		lease_say_answer(l, "releasing", &a);
	}
	if (out == LEASE_OK && l->verbose)
		lease_say(l, "released");
	answer_release(&a);
	return out;
}

enum lease_outcome lease_release(struct lease *l, bool force, bool quiet_not_held,
				 bool patient)
{
	char path[512], base[300];

	if (l->ops)
		return l->ops->release(l, quiet_not_held, patient);
	lock_path(l, "", base, sizeof(base));
	if (!force) {
		snprintf(path, sizeof(path), "%s?owner=%s", base, l->owner);
		return lease_delete(l, path, quiet_not_held, patient);
	}
	snprintf(path, sizeof(path), "%s?force=true", base);
	return delete_call(l, path, quiet_not_held, patient, true);
}

enum lease_outcome lease_delete(struct lease *l, const char *path, bool quiet_not_held,
				bool patient)
{
	return delete_call(l, path, quiet_not_held, patient, false);
}

