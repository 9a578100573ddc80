/* health_check.c -- `dlockd --health-check[=ready]`: the probe a container
 * runs (Docker's HEALTHCHECK, a Kubernetes exec probe) where there is no
 * curl and maybe no shell. It reads the same --listen / DLOCKD_LISTEN as
 * the dlockd it checks, so the two cannot disagree on the port; connects
 * to that address (0.0.0.0 as 127.0.0.1, [::] as ::1: what dlockd listens
 * on, seen from inside its own network namespace), sends one GET of
 * /healthz or /readyz and reads the status line. Every step waits on
 * poll(2) against one deadline, so a dlockd that accepts but never
 * answers costs the probe HEALTH_CHECK_TIMEOUT_MS, no more. Plain
 * sockets (dlockd links no HTTP client), with GnuTLS over them when the
 * dlockd probed serves HTTPS (--tls-cert). */
#include "api/health_check.h"

#include "service/config/config.h"
#include "service/base/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
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
static unsigned addr_text(const struct sockaddr_storage *addr, char *out, size_t cap)
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

/* One probe's connection: the socket, and over it a TLS session when
 * the dlockd probed serves HTTPS. */
struct hc_conn {
	int fd;
	gnutls_session_t tls;	/* NULL: plain HTTP */
	gnutls_certificate_credentials_t creds;
	int64_t deadline_ms;
	const char *tls_error;	/* GnuTLS' word on a TLS failure */
};

/* TLS on the connected socket. The server is dlockd itself on loopback,
 * so its certificate is not verified (a probe asks whether it answers,
 * not who it is). With --tls-client-ca dlockd wants a client certificate:
 * the probe shows the server's own, which passes where one CA signs both
 * (the usual internal PKI); the README says what to do otherwise. */
static int probe_tls(struct hc_conn *p, const struct config *cfg)
{
	int rc;

	if (gnutls_certificate_allocate_credentials(&p->creds) < 0 ||
	    gnutls_init(&p->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK) < 0) {
		errno = ENOMEM;
		return -1;
	}
	if (cfg->tls_client_ca &&
	    gnutls_certificate_set_x509_key_file(p->creds, cfg->tls_cert, cfg->tls_key,
						 GNUTLS_X509_FMT_PEM) < 0) {
		errno = EACCES;
		return -1;
	}
	gnutls_set_default_priority(p->tls);
	gnutls_credentials_set(p->tls, GNUTLS_CRD_CERTIFICATE, p->creds);
	gnutls_transport_set_int(p->tls, p->fd);
	while ((rc = gnutls_handshake(p->tls)) < 0) {
		if (gnutls_error_is_fatal(rc)) {
			p->tls_error = gnutls_strerror(rc);
			errno = EPROTO;
			return -1;
		}
		if (wait_for(p->fd, gnutls_record_get_direction(p->tls) ? POLLOUT : POLLIN,
			     p->deadline_ms) < 0)
			return -1;
	}
	return 0;
}

/* Send all of buf; -1 with errno on failure or at the deadline. */
static int probe_send(struct hc_conn *p, const char *buf, size_t len)
{
	size_t sent = 0;

	while (sent < len) {
		ssize_t n = p->tls ? gnutls_record_send(p->tls, buf + sent, len - sent)
				   : send(p->fd, buf + sent, len - sent, MSG_NOSIGNAL);

		if (n > 0) {
			sent += (size_t)n;
			continue;
		}
		if (p->tls ? n != GNUTLS_E_AGAIN && n != GNUTLS_E_INTERRUPTED
			   : n == 0 || (errno != EAGAIN && errno != EINTR)) {
			if (p->tls) {
				p->tls_error = gnutls_strerror((int)n);
				errno = EPROTO;
			}
			return -1;
		}
		if (wait_for(p->fd, POLLOUT, p->deadline_ms) < 0)
			return -1;
	}
	return 0;
}

/* Read what comes into buf (cap-1 bytes at most, NUL-terminated) until a
 * line ends or the peer closes; -1 with errno on failure. */
static int probe_recv_line(struct hc_conn *p, char *buf, size_t cap)
{
	size_t have = 0;

	buf[0] = '\0';
	while (have < cap - 1 && !memchr(buf, '\n', have)) {
		ssize_t n = p->tls ? gnutls_record_recv(p->tls, buf + have, cap - 1 - have)
				   : recv(p->fd, buf + have, cap - 1 - have, 0);

		if (n > 0) {
			have += (size_t)n;
			buf[have] = '\0';
			continue;
		}
		if (n == 0)
			break;
		if (p->tls ? n != GNUTLS_E_AGAIN && n != GNUTLS_E_INTERRUPTED
			   : errno != EAGAIN && errno != EINTR) {
			if (p->tls) {
				p->tls_error = gnutls_strerror((int)n);
				errno = EPROTO;
			}
			return -1;
		}
		if (wait_for(p->fd, POLLIN, p->deadline_ms) < 0)
			return -1;
	}
	buf[have] = '\0';
	return 0;
}

/* Connect (with TLS when cfg serves HTTPS), send the request and read the
 * status code into *status; returns 0, or -1 with what failed in step
 * ("connect to", ...) and why in *why (errno's, or GnuTLS' words). */
static int ask(const struct config *cfg, const struct sockaddr_storage *addr, socklen_t len,
	       const char *request, int64_t deadline_ms, const char **step, const char **why,
	       int *status)
{
	struct hc_conn p = { .deadline_ms = deadline_ms };
	char buf[256];
	int err = 0, rc = -1;
	socklen_t errlen = sizeof(err);

	*step = "connect to";
	p.fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p.fd < 0)
		return -1;
	if (connect(p.fd, (const struct sockaddr *)addr, len) < 0) {
		if (errno != EINPROGRESS || wait_for(p.fd, POLLOUT, deadline_ms) < 0)
			goto out;
		if (getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &errlen) < 0)
			goto out;
		if (err) {
			errno = err;
			goto out;
		}
	}
	*step = "complete a TLS handshake with";
	if (cfg->tls_cert && probe_tls(&p, cfg) < 0)
		goto out;
	*step = "send a request to";
	if (probe_send(&p, request, strlen(request)) < 0)
		goto out;
	/* the status line is all we read: "HTTP/1.1 200 OK\r\n" */
	*step = "read the answer of";
	if (probe_recv_line(&p, buf, sizeof(buf)) < 0)
		goto out;
	*step = "understand the answer of";
	if (sscanf(buf, "HTTP/1.%*1[01] %3d", status) != 1) {
		errno = EPROTO;
		goto out;
	}
	rc = 0;
out:
	err = errno;
	*why = p.tls_error ? p.tls_error : errno == EPROTO ? "not an HTTP answer"
							: strerror(errno);
	if (p.tls)
		gnutls_deinit(p.tls);
	if (p.creds)
		gnutls_certificate_free_credentials(p.creds);
	close(p.fd);
	errno = err;
	return rc;
}

int health_check_run(const struct config *cfg)
{
	const char *path = cfg->health_check == HEALTH_CHECK_READY ? "/readyz" : "/healthz";
	struct sockaddr_storage addr = cfg->listen_addr;
	char where[INET6_ADDRSTRLEN + 16], request[160];
	const char *step, *why = "";
	int status = 0;

	to_loopback(&addr);
	if (addr_text(&addr, where, sizeof(where)) == 0) {
		fprintf(stderr, "dlockd: health check: listen address '%s' has port 0, "
			"which names no port to check\n", cfg->listen);
		return 1;
	}
	snprintf(request, sizeof(request),
		 "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, where);
	if (ask(cfg, &addr, cfg->listen_addr_len, request, now_ms() + HEALTH_CHECK_TIMEOUT_MS,
		&step, &why, &status) < 0) {
		if (errno == ETIMEDOUT)
			fprintf(stderr, "dlockd: health check: could not %s %s within %d ms\n",
				step, where, HEALTH_CHECK_TIMEOUT_MS);
		else
			fprintf(stderr, "dlockd: health check: could not %s %s: %s\n", step,
				where, why);
		return 1;
	}
	if (status != 200) {
		fprintf(stderr, "dlockd: health check: GET %s on %s answered %d\n", path, where,
			status);
		return 1;
	}
	return 0;
}
