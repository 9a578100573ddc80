/* test_notify.c -- systemd's Type=notify: dlockd tells $NOTIFY_SOCKET
 * READY=1 only once Redis answers (started with Redis down, it waits for
 * it), and STOPPING=1 when SIGTERM stops it. The socket is a unix datagram
 * socket of the test's own, as systemd-notify(1) would find. */
#include "../harness/harness.h"

#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Read datagrams on fd for up to ms, appending them to got (cap bytes,
 * each followed by '|'); stops early once one holds want (NULL: never). */
static bool heard(int fd, int ms, const char *want, char *got, size_t cap)
{
	int64_t until = mono_ms() + ms;

	while (mono_ms() < until) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char buf[512];
		ssize_t n;
		size_t used = strlen(got);

		if (poll(&p, 1, (int)(until - mono_ms())) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		snprintf(got + used, cap - used, "%s|", buf);
		if (want && strstr(buf, want))
			return true;
	}
	return false;
}

TEST(notify_ready_once_redis_answers_and_stopping_at_sigterm)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char url[64], got[4096] = "";
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int64_t up;

	CHECK(fd >= 0, "a datagram socket");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify.sock", test_tmpdir());
	unlink(sa.sun_path);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s", sa.sun_path);
	rs.port = free_port();
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", rs.port);

	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	CHECK(dlockd_start(&d, url, NULL) == 0, "dlockd starts with Redis down");
	unsetenv("NOTIFY_SOCKET");
	CHECK(!heard(fd, 1500, "READY=1", got, sizeof(got)),
	      "no READY=1 while Redis is down (heard: %s)", got);
	CHECK(strstr(got, "STATUS=waiting for redis"), "it says what it waits for: %s", got);

	CHECK(redis_start(&rs) == 0, "Redis comes up");
	up = mono_ms();
	CHECK(heard(fd, 5000 * slow_factor(), "READY=1", got, sizeof(got)),
	      "READY=1 once Redis answers (heard: %s)", got);
	printf("# READY=1 %lld ms after Redis answered PING\n", (long long)(mono_ms() - up));
	CHECK(WAIT_FOR(status_of(&d, "GET", "/readyz") == 200, 3000), "and /readyz agrees");

	CHECK(dlockd_stop(&d, 5000) == 0, "SIGTERM stops it cleanly");
	CHECK(heard(fd, 2000, "STOPPING=1", got, sizeof(got)), "STOPPING=1 (heard: %s)", got);
	close(fd);
	unlink(sa.sun_path);
	redis_stop(&rs, true);
}

TEST(notify_ready_at_once_when_redis_answers_at_start)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct dlockd_srv d;
	char got[4096] = "";
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0, "a datagram socket");
	/* an abstract socket name, as systemd may give ("@...") */
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "dlockd-test-notify-%d", (int)getpid());
	CHECK(bind(fd, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			       strlen(sa.sun_path + 1))) == 0, "bind @%s", sa.sun_path + 1);
	{
		char env[120];

		snprintf(env, sizeof(env), "@%s", sa.sun_path + 1);
		setenv("NOTIFY_SOCKET", env, 1);
	}
	CHECK(dlockd_start(&d, NULL, NULL) == 0, "start with the shared Redis up");
	unsetenv("NOTIFY_SOCKET");
	CHECK(heard(fd, 3000 * slow_factor(), "READY=1", got, sizeof(got)),
	      "READY=1 (heard: %s)", got);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	CHECK(heard(fd, 2000, "STOPPING=1", got, sizeof(got)), "STOPPING=1 (heard: %s)", got);
	close(fd);
}
