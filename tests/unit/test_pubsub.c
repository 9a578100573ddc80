/* test_pubsub.c -- the subscriber against a fake Redis (a loopback socket
 * this test answers in RESP by hand) and two fake loops (their sinks below
 * record what they are handed): one SUBSCRIBE for
 * the first loop that wants a channel and none for the next, which is
 * confirmed at once; a message reaches every loop that wants its channel;
 * UNSUBSCRIBE only after the last lets go; a lost connection is told to
 * the loops, made again, and every wanted channel subscribed and
 * confirmed anew; a refused SUBSCRIBE drops the connection. */
#include "unit.h"

#include "service/redis/pubsub.c"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/* ----- Fake loops: what the subscriber hands their sinks ----- */

enum delivery_kind { D_CONFIRMED, D_MESSAGE, D_DISCONNECT };

struct delivery {
	enum delivery_kind kind;
	void *loop;
	char channel[64];
	char payload[8];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct delivery v[64];
	unsigned head, tail;
} D = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void record(enum delivery_kind kind, void *loop, const char *channel,
		   const char *payload, size_t len)
{
	struct delivery *d;

	pthread_mutex_lock(&D.lock);
	assert_true(D.tail < ARRAY_SIZE(D.v));
	d = &D.v[D.tail++];
	d->kind = kind;
	d->loop = loop;
	snprintf(d->channel, sizeof(d->channel), "%s", channel ? channel : "");
	snprintf(d->payload, sizeof(d->payload), "%.*s", (int)len, payload ? payload : "");
	pthread_cond_signal(&D.cond);
	pthread_mutex_unlock(&D.lock);
}

static void sink_confirmed(void *loop, const char *channel)
{
	record(D_CONFIRMED, loop, channel, NULL, 0);
}

static void sink_message(void *loop, const char *channel, const char *payload, size_t len,
			 uint64_t seq)
{
	(void)seq;
	record(D_MESSAGE, loop, channel, payload, len);
}

static void sink_disconnect(void *loop)
{
	record(D_DISCONNECT, loop, NULL, NULL, 0);
}

static void sink_lost(void *loop, const char *channel)
{
	record(D_DISCONNECT, loop, channel, NULL, 0);
}

/* The next delivery must be kind to loop (about channel, if not NULL);
 * waits up to 5 s for it. */
static void expect(enum delivery_kind kind, void *loop, const char *channel)
{
	struct timespec until;
	struct delivery d;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&D.lock);
	while (D.head == D.tail &&
	       pthread_cond_timedwait(&D.cond, &D.lock, &until) != ETIMEDOUT)
		;
	assert_true(D.head < D.tail);
	d = D.v[D.head++];
	pthread_mutex_unlock(&D.lock);
	assert_int_equal(d.kind, kind);
	assert_ptr_equal(d.loop, loop);
	if (channel)
		assert_string_equal(d.channel, channel);
}

static unsigned pending_deliveries(void)
{
	unsigned n;

	pthread_mutex_lock(&D.lock);
	n = D.tail - D.head;
	pthread_mutex_unlock(&D.lock);
	return n;
}

/* Two loops: the subscriber only compares their sinks' ctx. */
static char loop_a, loop_b;
#define WA ((void *)&loop_a)
#define WB ((void *)&loop_b)

/* ----- Fake Redis ----- */

static int listen_fd = -1, conn_fd = -1;
static struct pubsub *PS;

static void accept_subscriber(void)
{
	struct pollfd p = { .fd = listen_fd, .events = POLLIN };

	assert_int_equal(poll(&p, 1, 5000), 1);
	conn_fd = accept(listen_fd, NULL, NULL);
	assert_true(conn_fd >= 0);
}

/* Read exactly the RESP encoding of the command "verb channel". */
static void expect_command(const char *verb, const char *channel)
{
	char want[256], got[256];
	size_t len = (size_t)snprintf(want, sizeof(want), "*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
				      strlen(verb), verb, strlen(channel), channel);
	size_t have = 0;

	while (have < len) {
		struct pollfd p = { .fd = conn_fd, .events = POLLIN };
		ssize_t n;

		assert_int_equal(poll(&p, 1, 5000), 1);
		n = read(conn_fd, got + have, len - have);
		assert_true(n > 0);
		have += (size_t)n;
	}
	got[have] = '\0';
	assert_string_equal(got, want);
}

/* Read SUBSCRIBE of "a" and of "b" (as long as each other), in either
 * order: a connection made again subscribes in the table's order. */
static void expect_subscribes_a_and_b(void)
{
	const char *a = "*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n";
	const char *b = "*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nb\r\n";
	size_t len = strlen(a), have = 0;
	char got[128];

	while (have < 2 * len) {
		struct pollfd p = { .fd = conn_fd, .events = POLLIN };
		ssize_t n;

		assert_int_equal(poll(&p, 1, 5000), 1);
		n = read(conn_fd, got + have, 2 * len - have);
		assert_true(n > 0);
		have += (size_t)n;
	}
	assert_true((!memcmp(got, a, len) && !memcmp(got + len, b, len)) ||
		    (!memcmp(got, b, len) && !memcmp(got + len, a, len)));
}

static void send_raw(const char *s)
{
	assert_int_equal(write(conn_fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Redis' reply to (UN)SUBSCRIBE verb (lowercase) of channel. */
static void send_ack(const char *verb, const char *channel, int count)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "*3\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n:%d\r\n", strlen(verb),
		 verb, strlen(channel), channel, count);
	send_raw(buf);
}

static void send_message(const char *channel, const char *payload)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "*3\r\n$7\r\nmessage\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
		 strlen(channel), channel, strlen(payload), payload);
	send_raw(buf);
}

/* Nothing more arrives from the subscriber within ms. */
static void expect_silence(int ms)
{
	struct pollfd p = { .fd = conn_fd, .events = POLLIN };

	assert_int_equal(poll(&p, 1, ms), 0);
}

static bool wait_connected(bool up)
{
	for (int i = 0; i < 500; i++) {
		if (pubsub_connected(PS) == up)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

/* The fake Redis' address; it outlives the subscriber. */
static struct redis_url URL;

static int setup(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	char url[64];

	(void)state;
	D.head = D.tail = 0;
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(listen_fd, 4) < 0 || getsockname(listen_fd, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ntohs(a.sin_port));
	if (redis_url_parse(url, &URL, NULL, 0) < 0)
		return -1;
	PS = pubsub_start(&URL, false);
	if (!PS)
		return -1;
	for (int i = 0; i < 2; i++)
		pubsub_add_loop(PS, &(struct pubsub_sink){
			.ctx = i ? WB : WA,
			.confirmed = sink_confirmed,
			.message = sink_message,
			.disconnect = sink_disconnect,
			.lost = sink_lost,
		});
	accept_subscriber();
	return wait_connected(true) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	pubsub_stop(PS);
	PS = NULL;
	if (conn_fd >= 0)
		close(conn_fd);
	close(listen_fd);
	conn_fd = listen_fd = -1;
	redis_url_release(&URL);
	return 0;
}

static void test_pubsub__one_subscribe_for_every_loop_and_messages_to_each(void **state)
{
	(void)state;
	pubsub_want(PS, WA, "ch", true);
	expect_command("SUBSCRIBE", "ch");
	assert_int_equal(pending_deliveries(), 0);	/* not live before the reply */
	send_ack("subscribe", "ch", 1);
	expect(D_CONFIRMED, WA, "ch");
	/* a loop joining a live channel: confirmed at once, nothing sent */
	pubsub_want(PS, WB, "ch", true);
	expect(D_CONFIRMED, WB, "ch");
	send_message("ch", "0");
	expect(D_MESSAGE, WA, "ch");
	expect(D_MESSAGE, WB, "ch");
	send_message("other", "0");			/* nobody wants it */
	pubsub_want(PS, WA, "ch", false);
	expect_silence(100);				/* B still wants it */
	send_message("ch", "1");
	expect(D_MESSAGE, WB, "ch");
	pubsub_want(PS, WB, "ch", false);
	expect_command("UNSUBSCRIBE", "ch");
	send_ack("unsubscribe", "ch", 0);
	/* wanted again: subscribed anew */
	pubsub_want(PS, WA, "ch", true);
	expect_command("SUBSCRIBE", "ch");
	send_ack("subscribe", "ch", 1);
	expect(D_CONFIRMED, WA, "ch");
	assert_int_equal(pending_deliveries(), 0);
}

static void test_pubsub__wanted_again_before_the_unsubscribe_reply(void **state)
{
	(void)state;
	pubsub_want(PS, WA, "ch", true);
	expect_command("SUBSCRIBE", "ch");
	send_ack("subscribe", "ch", 1);
	expect(D_CONFIRMED, WA, "ch");
	pubsub_want(PS, WA, "ch", false);
	expect_command("UNSUBSCRIBE", "ch");
	pubsub_want(PS, WB, "ch", true);		/* while that is in flight */
	expect_command("SUBSCRIBE", "ch");
	send_ack("unsubscribe", "ch", 0);
	expect_silence(100);
	assert_int_equal(pending_deliveries(), 0);	/* not live yet */
	send_ack("subscribe", "ch", 1);
	expect(D_CONFIRMED, WB, "ch");
}

static void test_pubsub__a_lost_connection_is_made_again_and_confirmed_anew(void **state)
{
	(void)state;
	pubsub_want(PS, WA, "a", true);
	pubsub_want(PS, WB, "b", true);
	expect_command("SUBSCRIBE", "a");
	expect_command("SUBSCRIBE", "b");
	send_ack("subscribe", "a", 1);
	send_ack("subscribe", "b", 2);
	expect(D_CONFIRMED, WA, "a");
	expect(D_CONFIRMED, WB, "b");
	close(conn_fd);
	conn_fd = -1;
	expect(D_DISCONNECT, WA, NULL);
	expect(D_DISCONNECT, WB, NULL);
	accept_subscriber();				/* after the backoff */
	expect_subscribes_a_and_b();
	send_ack("subscribe", "b", 1);
	send_ack("subscribe", "a", 2);
	expect(D_CONFIRMED, WB, "b");
	expect(D_CONFIRMED, WA, "a");
	assert_true(pubsub_connected(PS));
}

static void test_pubsub__a_refused_subscribe_drops_the_connection(void **state)
{
	char c;

	(void)state;
	pubsub_want(PS, WA, "ch", true);
	expect_command("SUBSCRIBE", "ch");
	send_raw("-NOPERM this user has no permissions to access the 'ch' channel\r\n");
	expect(D_DISCONNECT, WA, NULL);
	assert_int_equal(read(conn_fd, &c, 1), 0);	/* closed by the subscriber */
	assert_true(wait_connected(false));
	assert_int_equal(pending_deliveries(), 0);	/* never confirmed */
	/* made again only after REFUSED_RETRY_MS (5 s), not the 100 ms backoff */
	{
		struct pollfd p = { .fd = listen_fd, .events = POLLIN };

		assert_int_equal(poll(&p, 1, 1000), 0);
	}
}

#define T(name) cmocka_unit_test_setup_teardown(test_pubsub__##name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(one_subscribe_for_every_loop_and_messages_to_each),
		T(wanted_again_before_the_unsubscribe_reply),
		T(a_lost_connection_is_made_again_and_confirmed_anew),
		T(a_refused_subscribe_drops_the_connection),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
