/* checker.c -- continuous lock load with a grant checker (see checker.h).
 *
 * Times are the test's monotonic clock. A section runs from the moment its
 * grant arrived to the moment the client stopped using the lock, and never
 * past the lease the client can count on: the grant's ttl_ms from when it
 * arrived (dlockd counts it from when it sent the command to Redis), or the
 * send time of the last renewed heartbeat plus the ttl asked for (Redis
 * started that lease later, so it ends later too). Two sections that
 * overlap in this clock were therefore inside at once for real. */
#include "checker.h"

#include "harness.h"
#include "netns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SECTIONS (1 << 18)
/* A grant's ttl_ms is the lease dlockd can vouch for when it answers; the
 * answer's trip to us (and Redis' millisecond clock) may take this much of
 * it. A renewal is counted from when the heartbeat was sent. */
#define LEASE_MARGIN_MS 20
/* probe_503: how long after a 503 the client asks again. A call dlockd
 * sent before it answered runs within 1.5 s of its sending (its deadline
 * in Redis' clock) or never; the rest is margin. */
#define PROBE_AFTER_MS 2000
/* An acquire is asked about first this soon: a call Redis ran before the
 * 503 still holds then, unless dlockd undid it (which takes a trip to
 * Redis: this is its time). */
#define PROBE_FIRST_MS 500
/* ... and again this often while the probe gets no definite answer. */
#define PROBE_RETRY_MS 250
/* A release is asked about at the latest this long before its lease
 * ends. */
#define PROBE_LEASE_LEFT_MS 200

/* Ordinary rounds contend for the first four names, waiting; long rounds
 * try the two hold names once and, if they get one, hold it long. */
enum { N_LOCK0, N_LOCK1, N_FAIR, N_RW, N_HOLD0, N_HOLD1, N_SEM, N_NAMES };
static const char *const kinds[N_NAMES] = { "lock0", "lock1", "fair0", "rw0", "hold0", "hold1",
					    "sem0" };
/* The most permits a semaphore of the load may have. */
#define SEM_LIMIT_MAX 8
enum mode { M_EXCL, M_READ, M_WRITE };

struct section {
	int name, mode, client, base;
	long long token;
	int64_t sent, granted, ended, rel_sent;
	int64_t lease_end;	/* the lease the client counted on, at the end */
	int hb_after;		/* first 200/409 to a heartbeat sent after the event */
	bool lost, ran_out;
	int64_t unseen_sent;	/* the client's earliest acquire of this name that got
				 * no answer (or a 503, unless probed) was sent then
				 * (0: none) */
};

struct load {
	struct load_opts o;
	char names[N_NAMES][200];
	pthread_t *threads;
	struct client **clients;
	struct section *secs;
	long nsecs;		/* atomic */
	int stop;		/* atomic */
	bool joined;		/* load_stop joined the clients */
	int long_holders;	/* atomic */
	int64_t ev_begin, ev_end;	/* atomic; 0 = not yet */
	long acq[5];		/* ok, refused (409), unavailable, conn failed, other */
	long hb[3];		/* ok, not held, failed */
	long probes, probe_effects, probes_unresolved;
	long sess[4];		/* sessions made; heartbeats 200, 404, neither */
	long acq_no_session;	/* acquires answered 404: the session had ended */
	bool joined_client[];	/* load_stop_group joined client i */
};

/* What a client asks again after an answer that left it unsure (probe_503):
 * an acquire answered 503 (the lock must not be its own now), a release
 * answered 503 (the lock must still be its own, unless its lease ran
 * out), a release that got no answer at all (only so that the next round
 * starts clean; it proves nothing). */
enum probe_kind { P_NONE, P_ACQUIRE, P_RELEASE, P_CLEANUP };

struct probe {
	enum probe_kind kind;
	int name, mode;
	int64_t since;		/* the answer came then */
	int64_t due;		/* ask (again) then */
	int64_t lease_end;	/* P_RELEASE: the lease the client counted on */
	bool again;		/* P_ACQUIRE: asked at once; once more when due */
};

/* What a client does now, for load_doing. */
enum { DOING_NOTHING, DOING_ACQUIRE, DOING_LONG_HOLD };

struct client {
	struct load *l;
	int id, base, group;
	unsigned seed;
	char owner[16];
	int stop;		/* atomic: load_stop_group */
	int doing;		/* atomic: DOING_* */
	struct probe probes[N_NAMES];	/* by name; one at a time */
	/* by name: an acquire got no answer (its instance died): it may have
	 * been granted, unseen, and the holding may still be there */
	int64_t unseen[N_NAMES];	/* when it was sent */
	/* load_opts.sessions: the session ("": none now), when it was made
	 * and when its last heartbeat answered 200 (or it was made) was sent;
	 * the first 200 or 404 to a heartbeat sent after the event ended, of
	 * a session made before the event began */
	char session[40];
	int64_t sess_made, sess_renewed;
	int sess_after;
};

static int64_t load_get(int64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void count(long *c)
{
	__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

static const char *base_of(struct client *c)
{
	return c->l->o.bases[c->base];
}

static bool stopping(struct client *c)
{
	return __atomic_load_n(&c->l->stop, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
}

static void doing(struct client *c, int what)
{
	__atomic_store_n(&c->doing, what, __ATOMIC_RELAXED);
}

/* A client whose instance is gone moves on to the next one, as a client
 * with a list of endpoints would. */
static int request(struct client *c, const char *method, const char *path,
		   struct http_resp *r)
{
	if (http_on(base_of(c), method, path, NULL, r) != 0) {
		c->base = (c->base + 1) % c->l->o.nbases;
		return -1;
	}
	return (int)r->status;
}

static void lock_path(const struct load *l, const struct section *s, const char *suffix,
		      const char *query, char *out, size_t cap)
{
	static const char *const fmt[] = { "/locks/%s%s%s", "/locks/%s%s%s", "/fairlocks/%s%s%s",
					   NULL, "/locks/%s%s%s", "/fairlocks/%s%s%s",
					   "/semaphores/%s%s%s" };

	if (s->name == N_RW)
		snprintf(out, cap, "/rwlocks/%s/%s%s%s", l->names[s->name],
			 s->mode == M_READ ? "read" : "write", suffix, query);
	else
		snprintf(out, cap, fmt[s->name], l->names[s->name], suffix, query);
}

/* ----- Sessions (load_opts.sessions) ----- */

/* Was the holding of s among those the heartbeat answer r dropped? */
static bool holding_dropped(const struct http_resp *r, const struct load *l,
			    const struct section *s)
{
	json_t *dropped = r->json ? json_object_get(r->json, "dropped") : NULL;
	size_t i;
	json_t *h;

	json_array_foreach(dropped, i, h) {
		const char *name = json_string_value(json_object_get(h, "name"));

		if (name && !strcmp(name, l->names[s->name]) &&
		    json_integer_value(json_object_get(h, "fencing_token")) == s->token)
			return true;
	}
	return false;
}

/* A call on c's session sent then answered st: the first 200 or 404 to
 * one sent after the event ended, of a session made before it began,
 * says whether the session lived through it. */
static void session_after(struct client *c, int64_t sent, int st)
{
	struct load *l = c->l;
	int64_t ev_end = load_get(&l->ev_end);

	if (ev_end && sent >= ev_end && c->sess_made < load_get(&l->ev_begin) && !c->sess_after &&
	    (st == 200 || st == 404))
		c->sess_after = st;
}

/* Heartbeat c's session. Answers as a lock's heartbeat would for the
 * holding of s (NULL: none): 200 renewed; 409 the session ended (404:
 * c forgets it) or dropped that holding; else the status (-1: no
 * answer). */
static int session_heartbeat(struct client *c, const struct section *s)
{
	struct load *l = c->l;
	char path[96];
	struct http_resp r;
	int64_t sent = mono_ms();
	int st;

	snprintf(path, sizeof(path), "/sessions/%s/heartbeat", c->session);
	st = request(c, "POST", path, &r);
	count(&l->sess[st == 200 ? 1 : st == 404 ? 2 : 3]);
	session_after(c, sent, st);
	if (st == 200)
		c->sess_renewed = sent;
	if (st == 200 && s && holding_dropped(&r, l, s))
		st = 409;
	http_free(&r);
	if (st == 404) {
		c->session[0] = '\0';
		st = 409;
	}
	return st;
}

/* Before a round: make c's session if it has none, heartbeat it if a
 * third of its ttl has passed. False: it has none (made none now). */
static bool session_kept(struct client *c)
{
	struct load *l = c->l;
	char path[64];
	struct http_resp r;
	const char *id;
	int64_t sent = mono_ms();

	if (c->session[0] && sent - c->sess_renewed >= l->o.ttl_ms / 3)
		session_heartbeat(c, NULL);
	if (c->session[0])
		return true;
	sent = mono_ms();
	snprintf(path, sizeof(path), "/sessions?ttl_ms=%d", l->o.ttl_ms);
	id = request(c, "POST", path, &r) == 201 ? json_str(&r, "session") : NULL;
	if (id) {
		snprintf(c->session, sizeof(c->session), "%s", id);
		c->sess_made = c->sess_renewed = sent;
		count(&l->sess[0]);
	}
	http_free(&r);
	return c->session[0];
}

/* The client stops: end its session (its holdings are released already). */
static void session_end(struct client *c)
{
	char path[96];
	struct http_resp r;

	if (!c->session[0])
		return;
	snprintf(path, sizeof(path), "/sessions/%s", c->session);
	request(c, "DELETE", path, &r);
	http_free(&r);
}

static int heartbeat(struct client *c, struct section *s)
{
	struct load *l = c->l;
	char q[96], path[400];
	struct http_resp r;
	int64_t sent = mono_ms();
	int64_t ev_end = load_get(&l->ev_end);
	int st;

	if (l->o.sessions) {
		st = session_heartbeat(c, s);
	} else {
		snprintf(q, sizeof(q), "?owner=%s&ttl_ms=%d", c->owner, l->o.ttl_ms);
		lock_path(l, s, "/heartbeat", q, path, sizeof(path));
		st = request(c, "POST", path, &r);
		http_free(&r);
	}
	count(&l->hb[st == 200 ? 0 : st == 409 ? 1 : 2]);
	if (ev_end && sent >= ev_end && s->granted < load_get(&l->ev_begin) && !s->hb_after &&
	    (st == 200 || st == 409))
		s->hb_after = st;
	return st == 200 ? 0 : st == 409 ? 1 : -1;
}

/* Use the lock for hold_ms, or until the lease we can count on ends. */
static void hold(struct client *c, struct section *s, int64_t lease_ms, int64_t hold_ms,
		 bool renew)
{
	int ttl = c->l->o.ttl_ms;
	int64_t lease_end = s->granted + lease_ms - LEASE_MARGIN_MS;
	int64_t until = s->granted + hold_ms, last_hb = s->sent, now;

	for (;;) {
		now = mono_ms();
		if (now >= until || __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
			break;
		if (now >= lease_end) {
			s->ran_out = true;
			break;
		}
		if (renew && now - last_hb >= ttl / 3) {
			int rc;

			last_hb = now;
			rc = heartbeat(c, s);
			if (rc == 0)
				lease_end = now + ttl - LEASE_MARGIN_MS;
			if (rc == 1) {
				s->lost = true;
				break;
			}
			continue;
		}
		now = until < lease_end ? until - now : lease_end - now;
		sleep_ms(now < 5 ? (int)now : 5);
	}
	now = mono_ms();
	s->ended = now < lease_end ? now : lease_end;
	s->lease_end = lease_end;
	/* also when the client learnt it only late: a heartbeat that hung
	 * past the lease (the section is counted up to the lease all the
	 * same) */
	s->ran_out |= now > lease_end;
}

/* Ask again what probe p is about: DELETE the name with the client's
 * owner id, once it is due (waiting for that, or else not yet). Done at
 * a definite answer (200, 409), else due again a little later. */
static void probe(struct client *c, struct probe *p, bool wait)
{
	struct load *l = c->l;
	struct section s = { .name = p->name, .mode = p->mode };
	char q[96], path[400];
	struct http_resp r;
	int64_t now;
	bool effect;
	int st;

	while ((now = mono_ms()) < p->due && wait && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
		sleep_ms(p->due - now < 50 ? (int)(p->due - now) : 50);
	if (now < p->due || __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
		return;
	snprintf(q, sizeof(q), "?owner=%s", c->owner);
	lock_path(l, &s, "", q, path, sizeof(path));
	st = request(c, "DELETE", path, &r);
	now = mono_ms();
	http_free(&r);
	if (st != 200 && st != 409) {
		p->due = now + PROBE_RETRY_MS;
		return;
	}
	if (p->kind == P_ACQUIRE && p->again && st == 409) {
		/* nothing held now; a call that runs late would show later */
		p->again = false;
		p->due = p->since + PROBE_AFTER_MS;
		return;
	}
	if (p->kind != P_CLEANUP) {
		/* a release probe answered 409 before the lease the client
		 * counted on ran out: Redis ran it while the lease still held,
		 * so something freed the lock: the release answered 503 */
		effect = p->kind == P_ACQUIRE ? st == 200 : st == 409 && now < p->lease_end;
		count(&l->probes);
		if (effect && __atomic_add_fetch(&l->probe_effects, 1, __ATOMIC_RELAXED) <= 5)
			printf("# a 503 took effect: %s answered 503 to client %d, yet the release "
			       "asked %lld ms later found the lock %s\n",
			       p->kind == P_ACQUIRE ? "an acquire" : "a release", c->id,
			       (long long)(now - p->since),
			       p->kind == P_ACQUIRE ? "held by it" : "free before its lease ran out");
	}
	p->kind = P_NONE;
}

static void probe_later(struct client *c, enum probe_kind kind, const struct section *s)
{
	int64_t now = mono_ms(), due = now + PROBE_AFTER_MS;

	/* a release is asked about while its lease still runs, or the answer
	 * proves nothing: sooner if need be (a call that runs after that
	 * finds the probe has released the lock, and changes nothing) */
	if (kind == P_RELEASE && due > s->lease_end - PROBE_LEASE_LEFT_MS)
		due = s->lease_end - PROBE_LEASE_LEFT_MS > now ? s->lease_end - PROBE_LEASE_LEFT_MS
							       : now;
	/* an acquire is asked about soon too: a call Redis ran before the
	 * 503 would hold now, if only until its lease ends */
	if (kind == P_ACQUIRE)
		due = now + PROBE_FIRST_MS;
	c->probes[s->name] = (struct probe){ .kind = kind, .name = s->name, .mode = s->mode,
					     .since = now, .due = due, .lease_end = s->lease_end,
					     .again = kind == P_ACQUIRE };
}

/* Run the probes due (wait: every one, waiting until it is due). */
static void probes_due(struct client *c, bool wait)
{
	for (int i = 0; i < N_NAMES; i++)
		if (c->probes[i].kind != P_NONE)
			probe(c, &c->probes[i], wait);
}

static void one_round(struct client *c, long round)
{
	struct load *l = c->l;
	struct section s = { .client = c->id };
	char q[128], path[400];
	struct http_resp r;
	int st;
	long long lease;
	bool lng = l->o.long_every > 0 && round % l->o.long_every == l->o.long_every - 1;

	s.name = lng ? N_HOLD0 + (int)(rand_r(&c->seed) % 2) : (int)(rand_r(&c->seed) % N_HOLD0);
	if (!lng && l->o.semaphore_limit > 0 && rand_r(&c->seed) % 5 == 0)
		s.name = N_SEM;
	s.mode = s.name != N_RW ? M_EXCL : rand_r(&c->seed) % 3 ? M_READ : M_WRITE;
	s.base = c->base;
	if (c->probes[s.name].kind != P_NONE) {
		sleep_ms(20);	/* not this name until we know where it stands */
		return;
	}
	if (l->o.sessions && !session_kept(c)) {
		sleep_ms(20);
		return;
	}
	if (l->o.sessions)
		snprintf(q, sizeof(q), "?owner=%s&session=%s&wait_ms=%d", c->owner, c->session,
			 lng ? 0 : l->o.wait_ms < l->o.ttl_ms / 3 ? l->o.wait_ms : l->o.ttl_ms / 3);
	else
		snprintf(q, sizeof(q), "?owner=%s&ttl_ms=%d&wait_ms=%d", c->owner, l->o.ttl_ms,
			 lng ? 0 : l->o.wait_ms);
	if (s.name == N_SEM)
		snprintf(q + strlen(q), sizeof(q) - strlen(q), "&limit=%d", l->o.semaphore_limit);
	lock_path(l, &s, "", q, path, sizeof(path));
	s.sent = mono_ms();
	doing(c, DOING_ACQUIRE);
	st = request(c, "PUT", path, &r);
	doing(c, DOING_NOTHING);
	s.granted = mono_ms();
	s.token = st == 200 ? json_int(&r, "fencing_token") : 0;
	lease = st == 200 ? json_int(&r, "ttl_ms") : 0;
	http_free(&r);
	s.unseen_sent = c->unseen[s.name];
	if (l->o.sessions)
		session_after(c, s.sent, st);
	if (st == 404 && l->o.sessions) {
		count(&l->acq_no_session);
		c->session[0] = '\0';
		return;
	}
	if (st != 200) {
		count(&l->acq[st == 409 ? 1 : st == 503 ? 2 : st < 0 ? 3 : 4]);
		/* no answer, or (unless probed) a 503, which a call in flight
		 * as its connection broke gets though Redis may have run it
		 * (docs/operations/failure-modes.md): with AOF its grant comes
		 * back after a restart, and a later acquire of the owner's
		 * finds it, with its token (seen once, a write lock's) */
		if ((st < 0 || (st == 503 && !l->o.probe_503)) && !c->unseen[s.name])
			c->unseen[s.name] = s.sent;
		if (st == 503 && l->o.probe_503)
			probe_later(c, P_ACQUIRE, &s);
		if (st != 409)
			sleep_ms(20);
		return;
	}
	count(&l->acq[0]);
	if (lng) {
		__atomic_add_fetch(&l->long_holders, 1, __ATOMIC_RELAXED);
		doing(c, DOING_LONG_HOLD);
	}
	hold(c, &s, lease,
	     lng ? l->o.long_ms : (int64_t)(rand_r(&c->seed) % (l->o.hold_max_ms + 1)), lng);
	if (lng) {
		doing(c, DOING_NOTHING);
		__atomic_sub_fetch(&l->long_holders, 1, __ATOMIC_RELAXED);
	}
	s.rel_sent = mono_ms();
	snprintf(q, sizeof(q), "?owner=%s", c->owner);
	lock_path(l, &s, "", q, path, sizeof(path));
	st = request(c, "DELETE", path, &r);
	http_free(&r);
	if (l->o.probe_503 && st == 503)
		probe_later(c, P_RELEASE, &s);
	else if ((l->o.probe_503 || l->o.sessions) && st != 200 && st != 409)
		/* a session's heartbeats would keep a holding whose release
		 * failed for as long as the session lives: release it again */
		probe_later(c, P_CLEANUP, &s);
	{
		long i = __atomic_fetch_add(&l->nsecs, 1, __ATOMIC_RELAXED);

		if (i < MAX_SECTIONS)
			l->secs[i] = s;
	}
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	struct load *l = c->l;

	if (l->o.nnets)
		netns_enter(l->o.nets[c->group]);
	http_abort_when(&c->stop);
	for (long round = 0; !stopping(c); round++) {
		probes_due(c, false);
		one_round(c, round);
	}
	/* the load stops: the probes still pending get a few tries */
	for (int tries = 0; tries < 3 && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE); tries++)
		probes_due(c, true);
	for (int i = 0; i < N_NAMES; i++)
		if (c->probes[i].kind != P_NONE && c->probes[i].kind != P_CLEANUP)
			count(&l->probes_unresolved);
	session_end(c);
	http_abort_when(NULL);
	return NULL;
}

/* A test that returns (at a failed CHECK) with its load running: stop and
 * free it before the next test. */
static void load_end(void *arg)
{
	struct load *l = arg;

	load_stop(l);
	load_free(l);
}

struct load *load_start(const struct load_opts *o)
{
	struct load *l = calloc(1, sizeof(*l) + (size_t)o->clients * sizeof(bool));

	l->o = *o;
	if (l->o.semaphore_limit > SEM_LIMIT_MAX)
		l->o.semaphore_limit = SEM_LIMIT_MAX;
	for (int i = 0; i < N_NAMES; i++)
		snprintf(l->names[i], sizeof(l->names[i]), "%s-%s", o->prefix, kinds[i]);
	l->secs = calloc(MAX_SECTIONS, sizeof(*l->secs));
	l->threads = calloc((size_t)o->clients, sizeof(*l->threads));
	l->clients = calloc((size_t)o->clients, sizeof(*l->clients));
	for (int i = 0; i < o->clients; i++) {
		struct client *c = calloc(1, sizeof(*c));

		*c = (struct client){ .l = l, .id = i, .base = i % o->nbases,
				      .group = o->nnets ? i % o->nnets : 0,
				      .seed = (unsigned)(i * 7919 + 1) };
		snprintf(c->owner, sizeof(c->owner), "c%d", i);
		l->clients[i] = c;
		pthread_create(&l->threads[i], NULL, client_main, c);
	}
	test_at_end(load_end, l);
	return l;
}

void load_event_begin(struct load *l)
{
	__atomic_store_n(&l->ev_begin, mono_ms(), __ATOMIC_RELEASE);
}

void load_event_end(struct load *l)
{
	__atomic_store_n(&l->ev_end, mono_ms(), __ATOMIC_RELEASE);
}

int load_long_holders(struct load *l)
{
	return __atomic_load_n(&l->long_holders, __ATOMIC_RELAXED);
}

long load_grants(struct load *l)
{
	return __atomic_load_n(&l->acq[0], __ATOMIC_RELAXED);
}

void load_doing(struct load *l, int group, int *acquiring, int *holding_long)
{
	*acquiring = *holding_long = 0;
	for (int i = 0; i < l->o.clients; i++) {
		int what = __atomic_load_n(&l->clients[i]->doing, __ATOMIC_RELAXED);

		if (l->clients[i]->group != group || l->joined_client[i])
			continue;
		*acquiring += what == DOING_ACQUIRE;
		*holding_long += what == DOING_LONG_HOLD;
	}
}

void load_stop_group(struct load *l, int group)
{
	for (int i = 0; i < l->o.clients; i++)
		if (l->clients[i]->group == group)
			__atomic_store_n(&l->clients[i]->stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < l->o.clients; i++)
		if (l->clients[i]->group == group && !l->joined_client[i]) {
			pthread_join(l->threads[i], NULL);
			l->joined_client[i] = true;
		}
}

void load_stop(struct load *l)
{
	if (l->joined)
		return;
	__atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < l->o.clients; i++)
		if (!l->joined_client[i])
			pthread_join(l->threads[i], NULL);
	l->joined = true;
}

void load_free(struct load *l)
{
	test_at_end_cancel(l);
	load_stop(l);
	for (int i = 0; i < l->o.clients; i++)
		free(l->clients[i]);
	free(l->clients);
	free(l->secs);
	free(l->threads);
	free(l);
}

/* ----- The check ----- */

static int by_name_granted(const void *a, const void *b)
{
	const struct section *x = a, *y = b;

	if (x->name != y->name)
		return x->name - y->name;
	return (x->granted > y->granted) - (x->granted < y->granted);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* When the event lost Redis' data, a section granted before it counts only
 * up to the event: after it, keeping that holder out is the job of its
 * (now smaller) fencing token, which the check still compares. */
static int64_t counted_end(const struct load *l, const struct section *s, bool loss)
{
	if (loss && l->ev_begin && s->granted < l->ev_begin && s->ended > l->ev_begin)
		return l->ev_begin;
	return s->ended;
}

/* How many of the first n sections (in grant order) were granted before t. */
static long granted_before(const struct section *s, long n, int64_t t)
{
	long lo = 0, hi = n;

	while (lo < hi) {
		long mid = lo + (hi - lo) / 2;

		if (s[mid].granted < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Is a (the i-th section of its name) a repeat of an earlier grant to the
 * same client: the same holding, with the same token? */
static bool repeat_of(const struct section *s, long i, const struct section *a)
{
	while (i-- > 0)
		if (s[i].client == a->client && s[i].token == a->token)
			return true;
	return false;
}

/* a's token may be that of a grant a's client never saw: an earlier
 * acquire of the name got no answer, the token is above every token
 * granted before that acquire was sent (top: as in check_name), and no
 * other client was ever given it. (A read holding keeps its token while
 * the owner reads: an unseen read, an upgrade to write with a fresh token,
 * its release, and a read again give the read's older token back.) */
static bool unseen_repeat(const struct section *s, long n, const long *top,
			  const struct section *a)
{
	long k;

	if (!a->unseen_sent)
		return false;
	k = top[granted_before(s, n, a->unseen_sent)];
	if (k >= 0 && a->token <= s[k].token)
		return false;
	for (long i = 0; i < n; i++)
		if (s[i].client != a->client && s[i].token == a->token)
			return false;
	return true;
}

/* The n sections of one name, in grant order. */
static void check_name(const struct load *l, const struct section *s, long n, bool loss,
		       struct load_report *rep, int64_t *lat, long *nlat)
{
	int64_t end_any = 0, end_write = 0;	/* latest end among earlier sections */
	/* the semaphore: the latest ends among earlier sections, largest first;
	 * a grant before the limit-th of them is one permit too many */
	int64_t ends[SEM_LIMIT_MAX] = { 0 };
	int sem = n > 0 && s[0].name == N_SEM ? l->o.semaphore_limit : 0;
	int64_t last_grant = l->ev_end;
	long *top = calloc((size_t)n + 1, sizeof(*top));	/* top[k]: max token of s[0..k) */

	top[0] = -1;
	for (long i = 0; i < n; i++)
		top[i + 1] = top[i] < 0 || s[i].token > s[top[i]].token ? i : top[i];
	for (long i = 0; i < n; i++) {
		const struct section *a = &s[i];
		int64_t limit = sem ? ends[sem - 1] : a->mode == M_READ ? end_write : end_any;
		int64_t end = counted_end(l, a, loss);
		long k = top[granted_before(s, i, a->sent)];

		if (limit > a->granted) {
			if (rep->overlaps < 5)
				printf("# overlap on %s: client %d (token %lld) granted at %lld "
				       "while an earlier section ran until %lld\n",
				       l->names[a->name], a->client, a->token,
				       (long long)a->granted, (long long)limit);
			rep->overlaps++;
		}
		if (end > end_any)
			end_any = end;
		for (int j = 0, ins = 0; sem && j < sem && !ins; j++) {
			if (end > ends[j]) {
				memmove(ends + j + 1, ends + j, (size_t)(sem - j - 1) * sizeof(*ends));
				ends[j] = end;
				ins = 1;
			}
		}
		if (a->mode != M_READ && end > end_write)
			end_write = end;
		/* every grant that arrived before this one was asked for has
		 * a smaller token, but for a repeat: the client's PUT found it
		 * still holding (its DELETE, or the answer to its PUT, was lost
		 * with a killed dlockd), and the holding's token came back */
		if (k >= 0 && a->token <= s[k].token && !repeat_of(s, i, a) &&
		    !unseen_repeat(s, n, top, a)) {
			if (rep->token_regressions < 5)
				printf("# token regression on %s: client %d sent at %lld and was "
				       "granted %lld; client %d had been granted %lld at %lld\n",
				       l->names[a->name], a->client, (long long)a->sent, a->token,
				       s[k].client, s[k].token, (long long)s[k].granted);
			rep->token_regressions++;
		}
		if (l->ev_end && a->granted > l->ev_end && a->name < N_HOLD0) {
			rep->grants_after_event++;
			if (a->granted - last_grant > rep->max_gap_after_event_ms) {
				rep->max_gap_after_event_ms = a->granted - last_grant;
				rep->max_gap_kind = kinds[a->name];
			}
			last_grant = a->granted;
		}
		if (i > 0 && a->mode != M_READ && s[i - 1].mode != M_READ &&
		    s[i - 1].base != a->base && a->sent < s[i - 1].rel_sent &&
		    (!l->ev_begin || s[i - 1].rel_sent < l->ev_begin)) {
			int64_t d = a->granted - s[i - 1].rel_sent;

			lat[(*nlat)++] = d > 0 ? d : 0;
		}
	}
	free(top);
}

void load_check(struct load *l, bool loss_excused, struct load_report *rep)
{
	long n = l->nsecs < MAX_SECTIONS ? l->nsecs : MAX_SECTIONS;
	int64_t *lat = calloc((size_t)n + 1, sizeof(*lat));
	long nlat = 0, from = 0;

	memset(rep, 0, sizeof(*rep));
	rep->max_gap_kind = "";
	rep->sections = n;
	rep->acq_ok = rep->grants = l->acq[0];
	rep->acq_refused = l->acq[1];
	rep->acq_unavailable = l->acq[2];
	rep->acq_conn_failed = l->acq[3];
	rep->acq_other = l->acq[4];
	rep->hb_ok = l->hb[0];
	rep->hb_not_held = l->hb[1];
	rep->hb_failed = l->hb[2];
	rep->probes = l->probes;
	rep->probe_503_effects = l->probe_effects;
	rep->probes_unresolved = l->probes_unresolved;
	rep->sess_made = l->sess[0];
	rep->sess_hb_ok = l->sess[1];
	rep->sess_hb_ended = l->sess[2];
	rep->sess_hb_failed = l->sess[3];
	rep->acq_no_session = l->acq_no_session;
	for (int i = 0; i < l->o.clients; i++) {
		int after = l->clients[i]->sess_after;

		rep->sess_straddled += after != 0;
		rep->sess_straddled_kept += after == 200;
		rep->sess_straddled_ended += after == 404;
	}
	qsort(l->secs, (size_t)n, sizeof(*l->secs), by_name_granted);
	for (long i = 0; i < n; i++) {
		const struct section *s = &l->secs[i];

		rep->lost += s->lost;
		if (s->lost && !loss_excused && rep->lost <= 5)
			printf("# lost: %s token %lld, granted %+lld ms from the event's begin "
			       "through instance %d, not_held %lld ms later\n", l->names[s->name],
			       s->token, (long long)(s->granted - l->ev_begin), s->base,
			       (long long)(s->ended - s->granted));
		rep->ran_out += s->ran_out;
		if (l->ev_begin && s->granted >= l->ev_begin && (!l->ev_end || s->granted <= l->ev_end)) {
			rep->grants_during_event++;
			if (s->base < LOAD_MAX_BASES)
				rep->grants_during_event_by_base[s->base]++;
		}
		if (s->hb_after) {
			rep->straddled++;
			rep->straddled_kept += s->hb_after == 200;
			rep->straddled_lost += s->hb_after == 409;
		}
		if (i + 1 == n || l->secs[i + 1].name != s->name) {
			check_name(l, &l->secs[from], i + 1 - from, loss_excused, rep, lat, &nlat);
			from = i + 1;
		}
	}
	rep->handoffs_cross = nlat;
	if (nlat) {
		qsort(lat, (size_t)nlat, sizeof(*lat), cmp_i64);
		rep->handoff_p50_ms = lat[nlat / 2];
		rep->handoff_p99_ms = lat[(nlat * 99) / 100];
		rep->handoff_max_ms = lat[nlat - 1];
	}
	free(lat);
}

void load_print(const char *what, const struct load_report *r)
{
	printf("# %s: %ld grants, %ld overlaps, %ld token regressions; acquire ok %ld, "
	       "refused %ld, 503 %ld, connection failed %ld, other %ld; heartbeats ok %ld, "
	       "not_held %ld, failed %ld; sections lost %ld, ran out %ld; straddling the "
	       "fault %ld (kept %ld, lost %ld); grants during it %ld (by instance %ld, %ld, %ld, "
	       "%ld); grants after it %ld, longest gap %lld ms%s%s%s; cross-instance hand-offs "
	       "%ld (p50 %lld, p99 %lld, max %lld ms)\n",
	       what, r->grants, r->overlaps, r->token_regressions, r->acq_ok, r->acq_refused,
	       r->acq_unavailable, r->acq_conn_failed, r->acq_other, r->hb_ok, r->hb_not_held,
	       r->hb_failed, r->lost, r->ran_out, r->straddled, r->straddled_kept,
	       r->straddled_lost, r->grants_during_event, r->grants_during_event_by_base[0],
	       r->grants_during_event_by_base[1], r->grants_during_event_by_base[2],
	       r->grants_during_event_by_base[3], r->grants_after_event,
	       (long long)r->max_gap_after_event_ms, *r->max_gap_kind ? " (" : "",
	       r->max_gap_kind, *r->max_gap_kind ? ")" : "", r->handoffs_cross,
	       (long long)r->handoff_p50_ms, (long long)r->handoff_p99_ms,
	       (long long)r->handoff_max_ms);
	if (r->sess_made)
		printf("# %s: sessions made %ld; their heartbeats ok %ld, ended (404) %ld, failed "
		       "%ld; acquires on an ended session %ld; sessions straddling the fault %ld "
		       "(kept %ld, ended %ld)\n", what, r->sess_made, r->sess_hb_ok, r->sess_hb_ended,
		       r->sess_hb_failed, r->acq_no_session, r->sess_straddled,
		       r->sess_straddled_kept, r->sess_straddled_ended);
	if (r->probes || r->probes_unresolved)
		printf("# %s: 503s asked again %ld, of which took effect %ld; unresolved %ld\n", what,
		       r->probes, r->probe_503_effects, r->probes_unresolved);
}
