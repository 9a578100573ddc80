/* health_check.c -- `dlockd --health-check[=ready]`: the probe a container
 * runs (Docker's HEALTHCHECK, a Kubernetes exec probe) where there is no
 * curl and maybe no shell. It reads the same --listen / DLOCKD_LISTEN as
 * the dlockd it checks, so the two cannot disagree on the port; connects
 * to that address (0.0.0.0 as 127.0.0.1, [::] as ::1: what dlockd listens
 * on, seen from inside its own network namespace), sends one GET of
 * /healthz or /readyz and reads the status line. Every step waits on
 * poll(2) against one deadline, so a dlockd that accepts but never
 * answers costs the probe HEALTH_CHECK_TIMEOUT_MS, no more. Plain
 * sockets: dlockd links no HTTP client. */
#include "health_check.h"

#include "config.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* 0.0.0.0 -> 127.0.0.1, :: -> ::1: a wildcard is no address to connect to. */
static void to_loopback(struct sockaddr_storage *addr)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;

	if (addr->ss_family == AF_INET && v4->sin_addr.s_addr == htonl(INADDR_ANY))
		v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (addr->ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr))
		v6->sin6_addr = in6addr_loopback;
}

/* "127.0.0.1:8080" or "[::1]:8080" into out; returns the port. */
static unsigned describe(const struct sockaddr_storage *addr, char *out, size_t cap)
{
	const struct sockaddr_in *v4 = (const struct sockaddr_in *)addr;
	const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)addr;
	char host[INET6_ADDRSTRLEN];
	unsigned port;

	if (addr->ss_family == AF_INET) {
		inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
		port = ntohs(v4->sin_port);
		snprintf(out, cap, "%s:%u", host, port);
	} else {
		inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
		port = ntohs(v6->sin6_port);
		snprintf(out, cap, "[%s]:%u", host, port);
	}
	return port;
}

/* Wait until fd is ready for events or the deadline passes; 0 when
 * ready, -1 on timeout (errno ETIMEDOUT) or error. */
static int wait_for(int fd, short events, int64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		int64_t left = deadline_ms - now_ms();
		int n;

		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* Connect, send the request and read the status code into *status;
 * returns 0, or -1 with what failed in step ("connect", ...) and errno. */
static int ask(const struct sockaddr_storage *addr, socklen_t len, const char *request,
	       int64_t deadline_ms, const char **step, int *status)
{
	char buf[256];
	size_t have = 0, sent = 0, want = strlen(request);
	int fd, err = 0, rc = -1;
	socklen_t errlen = sizeof(err);

	*step = "connect to";
	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)addr, len) < 0) {
		if (errno != EINPROGRESS || wait_for(fd, POLLOUT, deadline_ms) < 0)
			goto out;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) < 0)
			goto out;
		if (err) {
			errno = err;
			goto out;
		}
	}
	*step = "send a request to";
	while (sent < want) {
		ssize_t n = send(fd, request + sent, want - sent, MSG_NOSIGNAL);

		if (n > 0)
			sent += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			goto out;
		else if (wait_for(fd, POLLOUT, deadline_ms) < 0)
			goto out;
	}
	/* the status line is all we read: "HTTP/1.1 200 OK\r\n" */
	*step = "read the answer of";
	while (have < sizeof(buf) - 1 && !memchr(buf, '\n', have)) {
		ssize_t n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);

		if (n > 0) {
			have += (size_t)n;
		} else if (n == 0) {
			break;
		} else if (errno != EAGAIN && errno != EINTR) {
			goto out;
		} else if (wait_for(fd, POLLIN, deadline_ms) < 0) {
			goto out;
		}
	}
	buf[have] = '\0';
	*step = "understand the answer of";
	if (sscanf(buf, "HTTP/1.%*1[01] %3d", status) != 1) {
		errno = EPROTO;
		goto out;
	}
	rc = 0;
out:
	err = errno;
	close(fd);
	errno = err;
	return rc;
}

int health_check_run(const struct config *cfg)
{
	const char *path = cfg->health_check == HEALTH_CHECK_READY ? "/readyz" : "/healthz";
	struct sockaddr_storage addr = cfg->listen_addr;
	char where[INET6_ADDRSTRLEN + 16], request[160];
	const char *step;
	int status = 0;

	to_loopback(&addr);
	if (describe(&addr, where, sizeof(where)) == 0) {
		fprintf(stderr, "dlockd: health check: listen address '%s' has port 0, "
			"which names no port to check\n", cfg->listen);
		return 1;
	}
	snprintf(request, sizeof(request),
		 "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, where);
	if (ask(&addr, cfg->listen_addr_len, request, now_ms() + HEALTH_CHECK_TIMEOUT_MS,
		&step, &status) < 0) {
		if (errno == ETIMEDOUT)
			fprintf(stderr, "dlockd: health check: could not %s %s within %d ms\n",
				step, where, HEALTH_CHECK_TIMEOUT_MS);
		else
			fprintf(stderr, "dlockd: health check: could not %s %s: %s\n", step,
				where, strerror(errno));
		return 1;
	}
	if (status != 200) {
		fprintf(stderr, "dlockd: health check: GET %s on %s answered %d\n", path, where,
			status);
		return 1;
	}
	return 0;
}
