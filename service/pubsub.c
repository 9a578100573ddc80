/* pubsub.c -- one thread owning the subscriber connection.
 *
 * Its loop waits in epoll on: the Redis connection (replies and messages),
 * an eventfd (pubsub_notify: new subscription changes or an earlier timer),
 * and the waiters' hang-up epoll fd, with the next waiter timer as timeout.
 * Subscription changes are pipelined: every pending SUBSCRIBE/UNSUBSCRIBE
 * is appended, then written in one go. When the connection drops it
 * reconnects with backoff (100 ms doubling to 1 s); waiters_on_disconnect()
 * makes every channel subscribe again, and each confirmation wakes that
 * channel's sleepers, since a release may have gone unseen meanwhile.
 * Redis refusing a SUBSCRIBE (an ACL without the lock channels: Redis 7's
 * default for a new user) says so in the log, and the connection is
 * dropped and made again after REFUSED_RETRY_MS, so that no channel is
 * left waiting for a confirmation that never comes; meanwhile waiters
 * are retried at their holders' lease ends, not by messages. */
#include "pubsub.h"

#include "log.h"
#include "metrics.h"
#include "redis_conn.h"
#include "util.h"
#include "waiters.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1000
#define REFUSED_RETRY_MS 5000

enum { TAG_NOTIFY = 1, TAG_REDIS, TAG_HANGUP };

static struct {
	pthread_t thread;
	bool started;
	atomic_bool stop;
	atomic_bool connected;
	int event_fd;
	int epfd;
	redisContext *ctx;
	int64_t next_connect_ms;
	int64_t backoff_ms;
} P = { .event_fd = -1, .epfd = -1 };

void pubsub_notify(void)
{
	uint64_t one = 1;

	if (P.event_fd >= 0 && write(P.event_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, the thread will look */
	}
}

bool pubsub_connected(void)
{
	return atomic_load(&P.connected);
}

static void epoll_add(int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	epoll_ctl(P.epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void disconnect(void)
{
	if (!P.ctx)
		return;
	log_warn("redis subscriber connection lost: %s",
		 P.ctx->errstr[0] ? P.ctx->errstr : "closed");
	epoll_ctl(P.epfd, EPOLL_CTL_DEL, P.ctx->fd, NULL);
	redisFree(P.ctx);
	P.ctx = NULL;
	atomic_store(&P.connected, false);
	metrics_inc(METRIC_REDIS_RECONNECTS);
	waiters_on_disconnect();
	P.next_connect_ms = now_ms() + P.backoff_ms;
}

static void try_connect(void)
{
	int64_t now = now_ms();

	if (P.ctx || now < P.next_connect_ms)
		return;
	P.ctx = redis_conn_open();
	if (!P.ctx) {
		P.next_connect_ms = now + P.backoff_ms;
		P.backoff_ms = P.backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : P.backoff_ms * 2;
		return;
	}
	P.backoff_ms = BACKOFF_MIN_MS;
	epoll_add(P.ctx->fd, TAG_REDIS);
	atomic_store(&P.connected, true);
	log_info("redis subscriber connected");
}

/* Send every pending subscription change in one write. */
static void send_changes(void)
{
	char *name;
	bool subscribe;
	int done = 0, queued = 0;

	if (!P.ctx)
		return;
	while (waiters_next_change(&name, &subscribe)) {
		const char *argv[] = { subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", name };

		redisAppendCommandArgv(P.ctx, 2, argv, NULL);
		free(name);
		queued++;
	}
	while (queued && !done) {
		if (redisBufferWrite(P.ctx, &done) == REDIS_ERR) {
			disconnect();
			return;
		}
	}
}

/* Handle one reply; false when Redis refused a (UN)SUBSCRIBE. */
static bool handle_reply(redisReply *r)
{
	const char *kind;

	if (r->type == REDIS_REPLY_ERROR) {
		log_warn("redis refused a subscription: %s; waiters are woken only at lease "
			 "ends until dlockd's redis user may use the lock channels "
			 "(allchannels or &*)", r->str);
		return false;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return true;
	kind = r->element[0]->str;
	if (!strcmp(kind, "message") && r->element[2]->type == REDIS_REPLY_STRING) {
		metrics_inc(METRIC_PUBSUB_MESSAGES);
		waiters_on_message(r->element[1]->str, r->element[2]->str, r->element[2]->len);
	} else if (!strcmp(kind, "subscribe")) {
		waiters_on_subscribed(r->element[1]->str);
	} else if (!strcmp(kind, "unsubscribe")) {
		waiters_on_unsubscribed(r->element[1]->str);
	}
	return true;
}

static void read_replies(void)
{
	void *reply;

	if (redisBufferRead(P.ctx) == REDIS_ERR) {
		disconnect();
		return;
	}
	for (;;) {
		if (redisGetReplyFromReader(P.ctx, &reply) == REDIS_ERR) {
			disconnect();
			return;
		}
		if (!reply)
			break;
		if (!handle_reply(reply)) {
			freeReplyObject(reply);
			disconnect();
			P.next_connect_ms = now_ms() + REFUSED_RETRY_MS;
			return;
		}
		freeReplyObject(reply);
	}
}

static void *pubsub_main(void *arg)
{
	struct epoll_event evs[16];

	(void)arg;
	while (!atomic_load(&P.stop)) {
		int timeout, n;

		try_connect();
		send_changes();
		timeout = waiters_next_timeout_ms();
		if (!P.ctx) {
			int left = (int)(P.next_connect_ms - now_ms());

			if (left < 0)
				left = 0;
			if (timeout < 0 || left < timeout)
				timeout = left;
		}
		n = epoll_wait(P.epfd, evs, (int)ARRAY_SIZE(evs), timeout);
		if (n < 0 && errno != EINTR) {
			log_error("pubsub epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			uint64_t count;

			switch (evs[i].data.u32) {
			case TAG_NOTIFY:
				if (read(P.event_fd, &count, sizeof(count)) < 0) {
					/* EAGAIN: already drained */
				}
				break;
			case TAG_REDIS:
				if (P.ctx)
					read_replies();
				break;
			case TAG_HANGUP:
				waiters_check_hangups();
				break;
			}
		}
		waiters_run_timers();
	}
	return NULL;
}

int pubsub_init(void)
{
	P.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	P.epfd = epoll_create1(EPOLL_CLOEXEC);
	P.backoff_ms = BACKOFF_MIN_MS;
	if (P.event_fd < 0 || P.epfd < 0)
		return -1;
	epoll_add(P.event_fd, TAG_NOTIFY);
	return 0;
}

int pubsub_start(void)
{
	epoll_add(waiters_hangup_fd(), TAG_HANGUP);
	atomic_store(&P.stop, false);
	if (pthread_create(&P.thread, NULL, pubsub_main, NULL))
		return -1;
	P.started = true;
	return 0;
}

void pubsub_stop(void)
{
	if (P.started) {
		atomic_store(&P.stop, true);
		pubsub_notify();
		pthread_join(P.thread, NULL);
		P.started = false;
	}
	if (P.ctx) {
		redisFree(P.ctx);
		P.ctx = NULL;
	}
	if (P.epfd >= 0)
		close(P.epfd);
	if (P.event_fd >= 0)
		close(P.event_fd);
	P.epfd = P.event_fd = -1;
}
