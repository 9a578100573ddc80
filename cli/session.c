/* session.c -- `dlock run a,b -- COMMAND`: several locks held all or none
 * through one session of dlockd (see session.h). The session is made
 * first, with dlock's --ttl; PUT /sessions/{id}/locks then takes every
 * name for it or none, waiting in long polls no longer than a third of the
 * lease, with a heartbeat of the session between them so that it lives
 * while dlock waits. Once granted, the session's heartbeat renews every
 * holding, and its end releases them all. A heartbeat that finds any
 * holding gone, or the session ended, is a lost lease: the command must
 * stop. */
#include "session.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void session_renew_start(struct lease *l, long timeout_ms);
static enum lease_outcome session_renewed(struct lease *l, struct answer *a, int64_t sent_ms);
static enum lease_outcome session_release(struct lease *l, bool quiet_not_held, bool patient);

/* A kind's word in dlockd's sessions. */
static const char *session_kind(enum lease_kind kind)
{
	static const char *const words[] = { "lock", "fair", "read", "write", "semaphore" };

	return words[kind];
}

/* POST /sessions living l->ttl_ms; its id becomes l->owner. A failing
 * dlockd is retried as an acquire is; a signal on sigfd stops it. */
static enum lease_outcome create(struct lease *l, int sigfd, int64_t *sent_ms)
{
	json_t *req = json_pack("{s:I, s:s}", "ttl_ms", (json_int_t)l->ttl_ms, "name", l->owner);
	int64_t first_fail = mono_ms();
	enum lease_outcome out;
	char *body = NULL;
	int attempt = 0;

	if (req && l->value)
		json_object_set_new(req, "value", json_string(l->value));
	if (req)
		body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!body)
		return LEASE_UNAVAILABLE;
	for (;;) {
		const char *id;
		struct answer a;
		int64_t next = -1;

		*sent_ms = mono_ms();
		if (!client_call(l->client, "POST", "/sessions", body, 10000, sigfd, &a)) {
			out = LEASE_INTERRUPTED;	/* a session made meanwhile ends by itself */
			break;
		}
		id = json_string_value(json_object_get(a.json, "session"));
		if (a.status == 201 && id && lease_id_ok(id, 128)) {
			snprintf(l->owner, sizeof(l->owner), "%s", id);
			out = LEASE_OK;
		} else {
			out = a.status == 201 ? LEASE_UNAVAILABLE : lease_outcome_of(&a);
			if (out == LEASE_UNAVAILABLE)
				next = lease_retry_in(&a, first_fail, mono_ms(), attempt++);
			if (next < 0)
				lease_say_answer(l, "making a session", &a);
		}
		answer_release(&a);
		if (next < 0)
			break;
		if (!lease_pause_ms(sigfd, next)) {
			out = LEASE_INTERRUPTED;
			break;
		}
	}
	free(body);
	return out;
}

/* The body of PUT /sessions/{id}/locks: every name, waiting wait_ms. */
static char *locks_body(const struct lease *l, int64_t wait_ms)
{
	json_t *req = json_object(), *locks = json_array();
	char *body = NULL;

	for (size_t i = 0; req && locks && i < l->n_names; i++) {
		json_t *one = json_pack("{s:s, s:s}", "kind", session_kind(l->kind), "name",
					l->names[i]);

		if (one && l->kind == KIND_SEMAPHORE)
			json_object_set_new(one, "limit", json_integer(l->limit));
		json_array_append_new(locks, one);
	}
	if (req && locks && !json_object_set(req, "locks", locks) &&
	    !json_object_set_new(req, "wait_ms", json_integer(wait_ms)))
		body = json_dumps(req, JSON_COMPACT);
	json_decref(locks);
	json_decref(req);
	return body;
}

/* A granted answer's tokens, into l->fencing_token(s). */
static enum lease_outcome granted(struct lease *l, const struct answer *a)
{
	json_t *holdings = json_object_get(a->json, "holdings");
	size_t len = 1;
	char *s;

	for (size_t i = 0; i < l->n_names; i++)
		len += strlen(l->names[i]) + 22;
	s = malloc(len);
	if (!s)
		return LEASE_UNAVAILABLE;
	s[0] = '\0';
	for (size_t i = 0; i < l->n_names; i++) {
		long long token = -1;
		size_t j;
		json_t *h;

		json_array_foreach(holdings, j, h) {
			const char *name = json_string_value(json_object_get(h, "name"));
			json_t *t = json_object_get(h, "fencing_token");

			if (name && !strcmp(name, l->names[i]) && json_is_integer(t))
				token = json_integer_value(t);
		}
		if (token < 0) {
			lease_say(l, "acquiring: dlockd's answer has no fencing_token for '%s'",
				  l->names[i]);
			free(s);
			return LEASE_UNAVAILABLE;
		}
		if (i == 0)
			l->fencing_token = token;
		sprintf(s + strlen(s), "%s%s=%lld", i ? "," : "", l->names[i], token);
	}
	free(l->fencing_tokens);
	l->fencing_tokens = s;
	return LEASE_OK;
}

/* A 409 locked: which name was in the way at the wait's end. */
static void say_in_the_way(const struct lease *l, const struct answer *a)
{
	const char *name = json_string_value(json_object_get(json_object_get(a->json, "lock"),
							     "name"));

	lease_say(l, "'%s' is held by another owner: none of them acquired within the wait",
		  name ? name : "one of them");
}

/* Renew the session at once (sigfd stops it: false). */
static bool renew_now(struct lease *l, int sigfd, enum lease_outcome *out)
{
	int64_t sent = mono_ms();
	struct answer a;

	session_renew_start(l, 10000);
	while (!client_poll(l->client, sigfd, 1000)) {
		struct pollfd p = { .fd = sigfd, .events = POLLIN };

		if (sigfd >= 0 && poll(&p, 1, 0) > 0) {
			client_abort(l->client);
			return false;
		}
	}
	client_finish(l->client, &a);
	*out = session_renewed(l, &a, sent);
	answer_release(&a);
	return true;
}

/* Take every name for the session made already: long polls of at most a
 * third of the lease, with the session renewed between them. */
static enum lease_outcome take(struct lease *l, int64_t wait_ms, int sigfd, int64_t renewed)
{
	int64_t deadline = wait_ms < 0 ? INT64_MAX : mono_ms() + wait_ms;
	int64_t chunk = l->ttl_ms / 3 < LEASE_WAIT_CHUNK_MS ? l->ttl_ms / 3 : LEASE_WAIT_CHUNK_MS;
	int64_t first_fail = 0;
	enum lease_outcome out;
	int attempt = 0;
	char path[192];

	snprintf(path, sizeof(path), "/sessions/%s/locks", l->owner);
	for (;;) {
		int64_t now = mono_ms(), wait = deadline - now, next = 0;
		struct answer a;
		char *body;

		if (now - renewed >= l->ttl_ms / 3) {	/* keep the session while waiting */
			if (!renew_now(l, sigfd, &out))
				return LEASE_INTERRUPTED;
			if (out == LEASE_LOST || out == LEASE_REFUSED)
				return out;
			if (out == LEASE_OK)
				renewed = now;
		}
		wait = wait < 0 ? 0 : wait > chunk ? chunk : wait;
		if (!(body = locks_body(l, wait)))
			return LEASE_UNAVAILABLE;
		if (!client_call(l->client, "PUT", path, body, (long)(wait + LEASE_SLACK_MS), sigfd,
				 &a)) {
			free(body);
			return LEASE_INTERRUPTED;
		}
		free(body);
		out = lease_outcome_of(&a);
		if (out == LEASE_OK)
			out = granted(l, &a);
		if (out == LEASE_OK) {
			answer_release(&a);
			l->end_ms = renewed + l->ttl_ms;
			/* a grant after a long wait: the lease dlock counts on
			 * starts from a heartbeat it knows the time of */
			if (mono_ms() - renewed > l->ttl_ms / 10 && !renew_now(l, sigfd, &out))
				return LEASE_INTERRUPTED;
			return out;
		}
		now = mono_ms();
		if (out == LEASE_UNAVAILABLE) {
			first_fail = first_fail ? first_fail : now;
			next = lease_retry_in(&a, first_fail, now, attempt++);
			if (next < 0 || now >= deadline)
				lease_say_answer(l, "acquiring", &a);
		} else if (out == LEASE_CONFLICT) {
			first_fail = 0;
			attempt = 0;
			next = wait > 0 ? 0 : a.retry_after_s > 0 ? a.retry_after_s * 1000LL : 1000;
			if (now >= deadline)
				say_in_the_way(l, &a);
		} else {
			/* the session ended while dlock waited: the caller starts
			 * again with a new one (session_acquire) and says so */
			if (out != LEASE_LOST)
				lease_say_answer(l, "acquiring", &a);
			answer_release(&a);
			return out;
		}
		answer_release(&a);
		if (now >= deadline || next < 0)
			return out;
		if (next > deadline - now)
			next = deadline - now;
		if (!lease_pause_ms(sigfd, next))
			return LEASE_INTERRUPTED;
	}
}

/* Make a session and take every name for it. A session that ends while
 * dlock waits (dlockd or Redis stalled for longer than --ttl, so its
 * heartbeats could not keep it) held nothing dlock was told of, and its
 * end freed what it had: dlock waits on with a new one, within the same
 * wait, as a single name's acquire waits through such a stall. The
 * command has not run yet. */
static enum lease_outcome session_acquire(struct lease *l, int64_t wait_ms, int sigfd)
{
	int64_t deadline = wait_ms < 0 ? -1 : mono_ms() + wait_ms;
	char label[sizeof(l->owner)];	/* the session's name: owner, before its id */

	snprintf(label, sizeof(label), "%s", l->owner);
	for (int restarts = 0;; restarts++) {
		int64_t made, left = deadline < 0 ? -1 : deadline - mono_ms();
		enum lease_outcome out;

		snprintf(l->owner, sizeof(l->owner), "%s", label);
		out = create(l, sigfd, &made);
		if (out != LEASE_OK)
			return out;
		/* -1: no end; a wait over by now tries once more (0) */
		out = take(l, deadline >= 0 && left < 0 ? 0 : left, sigfd, made);
		/* nothing held, or whatever may have been: the session goes */
		if (out != LEASE_OK)
			session_release(l, true, out != LEASE_INTERRUPTED);
		if (out != LEASE_LOST)
			return out;
		free(l->fencing_tokens);	/* a grant of the session gone */
		l->fencing_tokens = NULL;
		if (deadline >= 0 && mono_ms() >= deadline) {
			lease_say(l, "acquiring: the session ended as the wait did, none of them "
				  "held");
			return LEASE_CONFLICT;
		}
		lease_say(l, "acquiring: session %s ended while waiting (dlockd or redis stalled "
			  "for longer than --ttl?); waiting on with a new one", l->owner);
		if (!lease_pause_ms(sigfd, restarts < 4 ? 100LL << restarts : 2000))
			return LEASE_INTERRUPTED;
	}
}

static void session_renew_start(struct lease *l, long timeout_ms)
{
	char path[192];

	snprintf(path, sizeof(path), "/sessions/%s/heartbeat", l->owner);
	client_start(l->client, "POST", path, NULL, timeout_ms);
}

/* The first of l's names that holdings (a session's) does not list; NULL
 * when it lists them all. */
static const char *missing_name(const struct lease *l, const json_t *holdings)
{
	for (size_t i = 0; i < l->n_names; i++) {
		bool found = false;
		size_t j;
		json_t *h;

		json_array_foreach(holdings, j, h)
			found = found || !strcmp(json_string_value(json_object_get(h, "name"))
						 ? json_string_value(json_object_get(h, "name")) : "",
						 l->names[i]);
		if (!found)
			return l->names[i];
	}
	return NULL;
}

static enum lease_outcome session_renewed(struct lease *l, struct answer *a, int64_t sent_ms)
{
	enum lease_outcome out = lease_outcome_of(a);
	json_t *holdings = json_object_get(a->json, "holdings");
	const char *gone;

	if (out == LEASE_OK && !json_is_array(holdings))
		return LEASE_UNAVAILABLE;
	/* while dlock waits, the session holds none of them yet */
	if (out == LEASE_OK && l->fencing_tokens && (gone = missing_name(l, holdings))) {
		lease_say(l, "renewing: '%s' is no longer held by the session (released, forced "
			  "free, or its lease ran out)", gone);
		return LEASE_LOST;
	}
	if (out == LEASE_OK)
		l->end_ms = sent_ms + l->ttl_ms;
	/* before a grant, a session that ended is waited on anew */
	if (out == LEASE_LOST && l->fencing_tokens)
		lease_say_answer(l, "renewing", a);
	return out;
}

static enum lease_outcome session_release(struct lease *l, bool quiet_not_held, bool patient)
{
	char path[192];

	snprintf(path, sizeof(path), "/sessions/%s", l->owner);
	return lease_delete(l, path, quiet_not_held, patient);
}

const struct lease_ops session_lease_ops = {
	.acquire = session_acquire,
	.renew_start = session_renew_start,
	.renewed = session_renewed,
	.release = session_release,
};
