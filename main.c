/* main.c -- dlockd's entry point and composition root: read the settings
 * (with --health-check, only probe a running dlockd and exit), build the
 * pieces and wire them together (with sentinels, the resolver
 * of the master; the kind of pub/sub; the subscriber; per event loop
 * its Redis connection, its waiters and its HTTP daemon, which is given
 * the handlers it serves requests with; the loops'
 * threads), wait for SIGTERM/SIGINT (SIGHUP re-reads the auth file and
 * the TLS certificates, and so does a change of them on disk, looked for
 * every second), then
 * stop: stop accepting, answer every waiting request with 503, give them
 * a moment to go out, let each loop finish, and tear down in reverse. */
#include "api/server.h"
#include "api/auth.h"
#include "api/handlers.h"
#include "service/lock/backend.h"
#include "service/config/config.h"
#include "service/redis/replica_sync.h"
#include "service/lock/fair_queue.h"
#include "service/lock/leavers.h"
#include "api/health_check.h"
#include "service/lock/locks.h"
#include "service/base/log.h"
#include "service/base/loop.h"
#include "service/base/metrics.h"
#include "service/base/sd_notify.h"
#include "service/redis/pubsub.h"
#include "service/redis/redis_blocking.h"
#include "service/redis/redis_conn.h"
#include "service/redis/redis_reply.h"
#include "service/redis/redis_target.h"
#include "service/redis/redis_tls.h"
#include "service/redis/redis_url.h"
#include "service/lock/scripts.h"
#include "api/tls.h"
#include "service/base/util.h"
#include "service/base/version.h"
#include "service/lock/waiters.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* How long waiting requests get to receive their 503 at shutdown. */
#define DRAIN_MS 1500
/* How often the auth file and the TLS certificates are looked at for a
 * change on disk (a mounted Kubernetes Secret is updated in place,
 * cert-manager rotates certificates, and nobody sends SIGHUP). */
#define FILES_LOOK_S 1
/* Under systemd's Type=notify, how often Redis is asked whether it
 * answers until it does (then READY=1). */
#define READY_LOOK_MS 250

/* What the HTTP server hands requests to: it names no handler itself. */
static const struct server_handlers http_handlers = {
	.lock = handle_lock,
	.health = handle_health,
	.session = handle_session,
	.completed = handle_lock_completed,
};

/* The label values of the lock metrics, by the indices they are counted
 * with (service/base/metrics.h counts numbers): kind="..." by enum
 * lock_kind, result="..." by enum lock_result and HANDLE_ABANDONED. */
static const char *const metric_kind_labels[LOCK_KIND_COUNT] = {
	[LOCK_KIND_LOCK] = "lock", [LOCK_KIND_FAIR] = "fairlock",
	[LOCK_KIND_READ] = "rwlock", [LOCK_KIND_WRITE] = "rwlock",
	[LOCK_KIND_SEMAPHORE] = "semaphore",
};
/* ... and mode="..." where a kind has two sides (NULL: none). */
static const char *const metric_mode_labels[LOCK_KIND_COUNT] = {
	[LOCK_KIND_READ] = "read", [LOCK_KIND_WRITE] = "write",
};
static const char *const metric_result_labels[HANDLE_RESULT_COUNT] = {
	[LOCK_OK] = "ok", [LOCK_HELD] = "locked", [LOCK_NOT_HELD] = "not_held",
	[LOCK_NOT_OWNER] = "not_owner", [LOCK_WRONG_KIND] = "wrong_kind",
	[LOCK_BACKEND_DOWN] = "backend_unavailable", [LOCK_SCRIPT_ERROR] = "script_error",
	[LOCK_UNCONFIRMED] = "replication_unconfirmed", [LOCK_TOO_MANY_HOLDS] = "too_many_holds",
	[LOCK_QUEUE_FULL] = "queue_full",
	[LOCK_LIMIT_MISMATCH] = "limit_mismatch",
	[HANDLE_ABANDONED] = "abandoned",
};

/* Give the metrics the label values of the indices they count. */
static void metrics_labels(void)
{
	unsigned nreasons;
	const char *const *reasons = redis_fault_labels(&nreasons);

	metrics_set_lock_labels(metric_kind_labels, LOCK_KIND_COUNT, metric_result_labels,
				HANDLE_RESULT_COUNT);
	metrics_set_lock_modes(metric_mode_labels);
	metrics_set_redis_error_labels(reasons, nreasons);
}

/* The start-up line, with what an operator looks for as fields of its own. */
static void log_started(const struct config *cfg, const struct redis_url *url,
			const char *shown_url, int port, bool sharded)
{
	char msg[512];
	const char *topology = url->cluster ? "cluster" : url->nsentinels ? "sentinel"
			       : url->unix_path ? "unix" : "standalone";
	const struct log_field f[] = {
		{ "version", dlockd_version, 0 },
		{ "listen", cfg->listen, 0 },
		{ "port", NULL, port },
		{ "redis", shown_url, 0 },
		{ "topology", topology, 0 },
		{ "pubsub", sharded ? "sharded" : "classic", 0 },
		{ "threads", NULL, cfg->threads },
		{ "tls", cfg->tls_cert ? "on" : "off", 0 },
		{ "auth", cfg->auth_file ? "on" : "off", 0 },
		{ "pid", NULL, (long long)getpid() },
	};

	snprintf(msg, sizeof(msg), "dlockd %s listening on %s", dlockd_version, cfg->listen);
	log_fields(LOG_INFO, msg, f, ARRAY_SIZE(f));
}

/* Under Type=notify: once Redis answers PING and the subscriber is
 * connected (what /readyz asks), tell systemd READY=1, so that `systemctl
 * start` and the units ordered after dlockd wait for a dlockd that can
 * serve. Returns whether it is told. */
static bool notify_ready(const struct redis_url *url, const struct pubsub *ps)
{
	if (!pubsub_connected(ps) || !redis_answers(url))
		return false;
	log_info("redis answers: ready");
	sd_notify_send("READY=1\nSTATUS=serving");
	return true;
}

/* One event loop: its thread and what runs on it. */
struct worker {
	struct backend backend;
	pthread_t thread;
	bool started;
};

/* Waiting clients each hold a socket: allow as many as the hard limit. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void drain_waiters(void)
{
	int64_t until = now_ms() + DRAIN_MS;
	struct timespec tick = { 0, 10 * 1000 * 1000 };

	waiters_shutdown_all();
	while (waiters_count_all() > 0 && now_ms() < until)
		nanosleep(&tick, NULL);
	if (waiters_count_all() > 0)
		log_warn("%u waiting requests did not get their answer before shutdown",
			 waiters_count_all());
	/* let the last 503s leave the socket buffers */
	nanosleep(&tick, NULL);
}

static void *worker_main(void *arg)
{
	loop_run(arg);
	return NULL;
}

/* The subscriber and a loop's waiters, joined here so that neither names
 * the other: the waiters ask for channels (waiters_subscribe_fn), and the
 * subscriber hands them the news (struct pubsub_sink), ctx being the
 * loop's struct waiters. */
static void want_channel(void *ps, struct waiters *ws, const char *channel, bool want)
{
	pubsub_want(ps, ws, channel, want);
}

static void tell_confirmed(void *ws, const char *channel)
{
	waiters_deliver_confirmed(ws, channel);
}

static void tell_message(void *ws, const char *channel, const char *payload, size_t len,
			 uint64_t seq)
{
	waiters_deliver_message(ws, channel, payload, len, seq);
}

static void tell_disconnect(void *ws)
{
	waiters_deliver_disconnect(ws);
}

static void tell_lost(void *ws, const char *channel)
{
	waiters_deliver_lost(ws, channel);
}

/* On the loop's thread as it starts: its Redis connection set up, and
 * dlockd's functions loaded, before the first request needs them (not on
 * that request's time: over a slow link, seconds). */
static void open_redis(struct loop *l, void *data)
{
	(void)l;
	redis_conn_open(data);
	scripts_load(data);
}

/* The loop, Redis connection, waiters and queue refresher of one worker; -1 if the kernel
 * refuses a loop. */
static int worker_init(struct worker *w, const struct config *cfg, const struct redis_url *url,
		       struct pubsub *ps)
{
	struct backend *b = &w->backend;

	b->loop = loop_new();
	if (!b->loop)
		return -1;
	b->redis = redis_conn_new(b->loop, url);
	loop_post(b->loop, open_redis, b->redis);
	b->waiters = waiters_new(b->loop, want_channel, ps);
	pubsub_add_loop(ps, &(struct pubsub_sink){
		.ctx = b->waiters,
		.confirmed = tell_confirmed,
		.message = tell_message,
		.disconnect = tell_disconnect,
		.lost = tell_lost,
	});
	b->fair = fair_queue_new(b);
	b->leavers = leavers_new(b);
	b->pubsub = ps;
	if (cfg->sync_replicas)
		b->sync = replica_sync_new(b->redis, cfg->sync_replicas, cfg->sync_timeout_ms);
	return 0;
}

static void worker_free(struct worker *w)
{
	struct backend *b = &w->backend;

	if (!b->loop)
		return;
	waiters_free(b->waiters);
	leavers_free(b->leavers);	/* before: the connection answers what it sends */
	redis_conn_free(b->redis);	/* what is still in flight is told "no reply" */
	replica_sync_free(b->sync);	/* after: the connection answered its WAITs */
	fair_queue_free(b->fair);	/* after: a refresh's answer finds it */
	loop_free(b->loop);
}

int main(int argc, char **argv)
{
	const struct backend **backends = NULL;
	struct worker *workers = NULL;
	struct redis_url url = { 0 };
	struct pubsub *ps = NULL;
	char *shown_url, why[256];
	struct config cfg;
	sigset_t stop_signals;
	int rc, sig, port = -1;
	bool sharded, ready;
	unsigned n;

	rc = config_load(&cfg, argc, argv);
	if (rc != 0) {
		/* a probe's failure is 1: Docker reserves 2 */
		bool probe = cfg.health_check != HEALTH_CHECK_OFF;

		config_release(&cfg);
		return rc > 0 ? 0 : probe ? 1 : 2;
	}
	if (cfg.health_check != HEALTH_CHECK_OFF) {
		/* no auth file, no Redis: only the running dlockd is asked */
		rc = health_check_run(&cfg);
		config_release(&cfg);
		return rc;
	}
	log_set_level(cfg.log_level);
	log_set_format(cfg.log_format);
	if (auth_load(cfg.auth_file) < 0 ||
	    tls_load(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca) < 0) {
		auth_release();
		config_release(&cfg);
		return 2;
	}
	raise_fd_limit();

	/* Every thread inherits this mask, so only sigtimedwait() below sees them. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGHUP);	/* re-read --auth-file, --tls-* */
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	locks_configure(cfg.queue_ttl_ms);
	locks_set_read_hold_caps(cfg.read_holds_per_owner, cfg.read_holds_per_lock);
	locks_set_fair_queue_cap(cfg.fair_queue_max);
	locks_set_key_prefix(cfg.key_prefix);
	metrics_labels();
	if (scripts_init() < 0) {
		log_error("a lock script is missing from the build");
		return 1;
	}
	if (redis_url_parse(cfg.redis_url, &url, why, sizeof(why)) < 0) {
		log_error("%s", why);
		return 1;
	}
	/* TLS to Redis: its files are read (a bad one stops here, exit 2,
	 * as for --tls-cert) and its pump started before any connection */
	if (url.tls && redis_tls_load(cfg.redis_ca, cfg.redis_cert, cfg.redis_key) < 0) {
		redis_url_release(&url);
		auth_release();
		tls_release();
		config_release(&cfg);
		return 2;
	}
	/* sentinels: a resolver finds the master before anything connects */
	if (url.nsentinels && redis_target_start(&url) < 0)
		return 1;
	if ((rc = redis_detect_cluster(&url, why, sizeof(why))) > 0) {
		/* the first thing a newcomer without a Redis sees: where, why,
		 * and how to point dlockd elsewhere */
		shown_url = redis_url_redacted(cfg.redis_url);
		log_warn("cannot reach Redis at %s: %s. Lock calls get 503 until it answers "
			 "(dlockd keeps trying). Give Redis' address with --redis URL or "
			 "DLOCKD_REDIS_URL, or run `make run`, which starts a private "
			 "redis-server", shown_url, why);
		free(shown_url);
		shown_url = NULL;
	}
	if (rc < 0) {
		/* a setting a cluster cannot serve: exit 2, as for any bad setting */
		redis_url_release(&url);
		redis_tls_release();
		auth_release();
		tls_release();
		config_release(&cfg);
		return 2;
	}
	/* as Redisson does: sharded pub/sub where a cluster has it */
	sharded = cfg.pubsub == PUBSUB_SHARDED ||
		  (cfg.pubsub == PUBSUB_AUTO && url.cluster && redis_has_sharded_pubsub(&url));
	scripts_set_sharded(sharded);
	ps = pubsub_start(&url, sharded);
	if (!ps) {
		log_error("cannot start the subscriber thread");
		return 1;
	}
	n = cfg.threads;
	workers = xcalloc(n, sizeof(*workers));
	backends = xcalloc(n, sizeof(*backends));
	for (unsigned i = 0; i < n; i++) {
		if (worker_init(&workers[i], &cfg, &url, ps) < 0)
			goto stop;
		backends[i] = &workers[i].backend;
	}
	port = server_start(&cfg, backends, n, &http_handlers);
	if (port < 0) {
		log_error("cannot listen on %s", cfg.listen);
		goto stop;
	}
	/* before the loops run: whoever sees an answer has seen this line */
	shown_url = redis_url_redacted(cfg.redis_url);
	log_started(&cfg, &url, shown_url, port, sharded);
	free(shown_url);
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&workers[i].thread, NULL, worker_main,
				   workers[i].backend.loop)) {
			log_error("cannot start an event loop thread");
			/* the loops left will never run: run each to its end
			 * here (stopped first, it takes no turn), which closes
			 * its mailbox, so that server_stop() waits for none of
			 * them to quiesce */
			for (unsigned j = i; j < n; j++) {
				loop_stop(workers[j].backend.loop);
				loop_run(workers[j].backend.loop);
			}
			port = -1;	/* exit 1 */
			goto stop;
		}
		workers[i].started = true;
	}

	ready = !sd_notify_wanted();	/* nobody to tell: no need to ask Redis */
	if (!ready) {
		sd_notify_send("STATUS=waiting for redis to answer");
		ready = notify_ready(&url, ps);
	}
	for (;;) {
		struct timespec look = { FILES_LOOK_S, 0 };
		bool files = auth_enabled() || tls_enabled();

		/* with files to watch, wake every FILES_LOOK_S to look at them;
		 * until systemd is told READY, every READY_LOOK_MS to ask Redis */
		if (!ready)
			look = (struct timespec){ 0, READY_LOOK_MS * 1000 * 1000 };
		sig = sigtimedwait(&stop_signals, NULL, files || !ready ? &look : NULL);
		if (sig == SIGHUP) {
			auth_reload();
			tls_reload();
		} else if (sig == SIGTERM || sig == SIGINT) {
			break;
		} else if (sig < 0 && errno == EAGAIN) {
			if (!ready)
				ready = notify_ready(&url, ps);
			if (files) {
				auth_reload_if_changed();
				tls_reload_if_changed();
			}
		} else if (sig < 0 && errno != EINTR) {
			sig = SIGTERM;
			break;
		}
	}
	log_info("signal %d: stopping", sig);
	sd_notify_send("STOPPING=1");

	server_quiesce();
	drain_waiters();
stop:
	server_stop();
	for (unsigned i = 0; i < n; i++)
		if (workers[i].started)
			pthread_join(workers[i].thread, NULL);
	if (server_free() > 0) {
		/* requests left waiting for a Redis that never answered: what
		 * they hold (connections, backends) is the exit's to free */
		log_info("stopped");
		_exit(0);
	}
	pubsub_stop(ps);
	for (unsigned i = 0; i < n; i++)
		worker_free(&workers[i]);
	free(workers);
	free(backends);
	redis_target_stop(&url);	/* after every connection that asks it */
	redis_tls_release();	/* after every connection: their tunnels close */
	redis_url_release(&url);
	auth_release();
	tls_release();		/* after server_free: no session holds it */
	config_release(&cfg);
	if (port < 0)
		return 1;
	log_info("stopped");
	return 0;
}
