/* main.c -- dlockd's entry point: read the settings, start the pieces in
 * dependency order (scripts, Redis, waiters, pubsub thread, HTTP server),
 * wait for SIGTERM/SIGINT (SIGHUP re-reads the auth file), then stop: stop accepting, answer every waiting
 * request with 503, give them a moment to go out, and tear down in reverse. */
#include "auth.h"
#include "config.h"
#include "locks.h"
#include "log.h"
#include "pubsub.h"
#include "redis_conn.h"
#include "scripts.h"
#include "util.h"
#include "version.h"
#include "waiters.h"
#include "../api/server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* How long waiting requests get to receive their 503 at shutdown. */
#define DRAIN_MS 1500

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

	waiters_shutdown();
	while (waiters_count() > 0 && now_ms() < until)
		nanosleep(&tick, NULL);
	if (waiters_count() > 0)
		log_warn("%u waiting requests did not get their answer before shutdown",
			 waiters_count());
	/* let the last 503s leave the socket buffers */
	nanosleep(&tick, NULL);
}

int main(int argc, char **argv)
{
	char *shown_url;
	struct config cfg;
	sigset_t stop_signals;
	int rc, sig, port;

	rc = config_load(&cfg, argc, argv);
	if (rc != 0) {
		config_release(&cfg);
		return rc > 0 ? 0 : 2;
	}
	log_set_level(cfg.log_level);
	log_set_format(cfg.log_format);
	if (auth_load(cfg.auth_file) < 0) {
		config_release(&cfg);
		return 2;
	}
	raise_fd_limit();

	/* Every thread inherits this mask, so only sigwait() below sees them. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGHUP);	/* re-read --auth-file */
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	locks_configure(cfg.queue_ttl_ms);
	locks_set_key_prefix(cfg.key_prefix);
	if (scripts_init() < 0 || redis_conn_setup(cfg.redis_url) < 0) {
		log_error("cannot set up scripts or the redis url");
		return 1;
	}
	if (pubsub_init() < 0 || waiters_init(pubsub_notify) < 0 || pubsub_start() < 0) {
		log_error("cannot start the subscriber thread");
		return 1;
	}
	port = server_start(&cfg);
	if (port < 0) {
		log_error("cannot listen on %s", cfg.listen);
		return 1;
	}
	shown_url = redis_url_redacted(cfg.redis_url);
	log_info("dlockd %s listening on %s (port %d), redis %s, %u threads, pid %d",
		 dlockd_version, cfg.listen, port, shown_url, cfg.threads, (int)getpid());
	free(shown_url);

	do {
		if (sigwait(&stop_signals, &sig) != 0)
			sig = SIGTERM;
		if (sig == SIGHUP)
			auth_reload();
	} while (sig != SIGTERM && sig != SIGINT);
	log_info("signal %d: stopping", sig);

	server_quiesce();
	drain_waiters();
	server_stop();
	pubsub_stop();
	waiters_release();
	redis_conn_cleanup();
	auth_release();
	config_release(&cfg);
	log_info("stopped");
	return 0;
}
