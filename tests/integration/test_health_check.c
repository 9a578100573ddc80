/* test_health_check.c -- `dlockd --health-check`, the probe of the
 * Dockerfile's HEALTHCHECK and the Kubernetes exec probes: exit 0 when
 * the dlockd its --listen (or DLOCKD_LISTEN, 0.0.0.0 taken as loopback)
 * names answers 200, and 1 with one line on stderr when nothing listens
 * there, when /readyz is 503 (=ready, Redis unreachable), when the
 * listener never answers (within its 2 s), or when its own settings are
 * bad (1, never the 2 Docker reserves). */
#include "../harness/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run `env -u DLOCKD_LISTEN <envs> dlockd --health-check<args>`; its exit
 * code, stdout and stderr in out, and how long it took in *ms. */
static int probe(const char *envs, const char *args, char *out, size_t cap, int64_t *ms)
{
	char cmd[1024];
	int64_t t0 = mono_ms();
	size_t n = 0;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "env -u DLOCKD_LISTEN %s %s --health-check%s 2>&1", envs,
		 dlockd_binary(), args);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (n + 1 < cap && !feof(f))
		n += fread(out + n, 1, cap - n - 1, f);
	out[n] = '\0';
	st = pclose(f);
	if (ms)
		*ms = mono_ms() - t0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One line, ending in a newline, and nothing after it. */
static bool one_line(const char *s)
{
	const char *nl = strchr(s, '\n');

	return nl && nl > s && nl[1] == '\0';
}

TEST(health_check_passes_on_a_serving_dlockd)
{
	char args[128], envs[128], out[1024];

	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d", H_dlockd.port);
	CHECK(probe("", args, out, sizeof(out), NULL) == 0, "--listen: exit 0; said: %s", out);
	CHECK(!*out, "and prints nothing: %s", out);
	snprintf(envs, sizeof(envs), "DLOCKD_LISTEN=0.0.0.0:%d", H_dlockd.port);
	CHECK(probe(envs, "", out, sizeof(out), NULL) == 0,
	      "DLOCKD_LISTEN=0.0.0.0:port (a container's) is probed on 127.0.0.1: exit 0; "
	      "said: %s", out);
	CHECK(probe(envs, "=ready", out, sizeof(out), NULL) == 0,
	      "=ready with Redis up: exit 0; said: %s", out);
	CHECK(probe(envs, "=live", out, sizeof(out), NULL) == 0, "=live: exit 0; said: %s", out);
}

TEST(health_check_fails_where_nothing_listens)
{
	char args[128], want[64], out[1024];
	int port = free_port();

	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d", port);
	CHECK(probe("", args, out, sizeof(out), NULL) == 1, "a free port: exit 1; said: %s", out);
	snprintf(want, sizeof(want), "127.0.0.1:%d", port);
	CHECK(one_line(out) && strstr(out, want) && strstr(out, "refused"),
	      "one line naming the address and why: %s", out);
}

TEST(health_check_ready_fails_while_redis_is_unreachable)
{
	static const char *const flags[] = { "--log-level", "error", NULL };
	char url[64], args[128], out[1024];
	struct dlockd_srv d;

	/* a Redis URL on a port nobody serves: alive, never ready */
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", free_port());
	CHECK(dlockd_start(&d, url, flags) == 0, "start against no Redis");
	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d", d.port);
	CHECK(probe("", args, out, sizeof(out), NULL) == 0, "alive: exit 0; said: %s", out);
	snprintf(args, sizeof(args), "=ready --listen 127.0.0.1:%d", d.port);
	CHECK(probe("", args, out, sizeof(out), NULL) == 1, "not ready: exit 1; said: %s", out);
	CHECK(one_line(out) && strstr(out, "/readyz") && strstr(out, "503"),
	      "one line saying /readyz answered 503: %s", out);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(health_check_gives_up_on_a_silent_listener)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	char args[128], out[1024];
	int64_t ms;
	int fd, rc;

	/* listens (the kernel completes the connection) but never answers */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 4) == 0 &&
	      getsockname(fd, (struct sockaddr *)&a, &len) == 0, "a silent listener");
	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d", ntohs(a.sin_port));
	rc = probe("", args, out, sizeof(out), &ms);
	close(fd);
	CHECK(rc == 1, "no answer: exit 1; said: %s", out);
	CHECK(one_line(out) && strstr(out, "within 2000 ms"), "one line saying so: %s", out);
	CHECK(ms >= 1900 && ms < 2000 + 1500 * slow_factor(),
	      "gave up after its 2 s, took %lld ms", (long long)ms);
}

TEST(health_check_with_bad_settings_exits_1)
{
	char out[1024];

	CHECK(probe("", "=sometimes", out, sizeof(out), NULL) == 1,
	      "a bad mode: exit 1 (Docker reserves 2); said: %s", out);
	CHECK(one_line(out) && strstr(out, "sometimes"), "one line naming it: %s", out);
	CHECK(probe("DLOCKD_THREADS=0", "", out, sizeof(out), NULL) == 1,
	      "a bad setting: exit 1; said: %s", out);
	CHECK(probe("", " --listen 127.0.0.1:0", out, sizeof(out), NULL) == 1,
	      "port 0 names nothing to probe: exit 1; said: %s", out);
	CHECK(one_line(out) && strstr(out, "port 0"), "one line saying so: %s", out);
}

/* A dlockd serving HTTPS is probed over TLS with the same settings; with
 * --tls-client-ca the probe shows the server's certificate as its own,
 * which passes where that certificate is also for client authentication
 * (pki's "node"), and not where it is for servers only ("server1"). */
TEST(health_check_speaks_tls_to_an_https_dlockd)
{
	const char *flags[3];	/* the server's --tls-cert, --tls-key, --tls-client-ca */
	char args[1200], out[1024];
	struct dlockd_srv d;

	CHECK(dlockd_start_mtls(&d, "node") == 0, "dlockd with HTTPS and client certificates");
	flags[0] = pki_path("node.pem");
	flags[1] = pki_path("node.key");
	flags[2] = pki_path("ca.pem");

	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d --tls-cert %s --tls-key %s "
		 "--tls-client-ca %s", d.port, flags[0], flags[1], flags[2]);
	CHECK(probe("", args, out, sizeof(out), NULL) == 0, "the same settings: exit 0; said: %s",
	      out);
	snprintf(args, sizeof(args), "=ready --listen 127.0.0.1:%d --tls-cert %s --tls-key %s "
		 "--tls-client-ca %s", d.port, flags[0], flags[1], flags[2]);
	CHECK(probe("", args, out, sizeof(out), NULL) == 0, "=ready: exit 0; said: %s", out);
	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d", d.port);
	CHECK(probe("", args, out, sizeof(out), NULL) == 1 && one_line(out),
	      "plain HTTP to the HTTPS port: exit 1, one line: %s", out);
	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d --tls-cert %s --tls-key %s "
		 "--tls-client-ca %s", d.port, pki_path("self.pem"), pki_path("self.key"),
		 flags[2]);
	CHECK(probe("", args, out, sizeof(out), NULL) == 1 && one_line(out),
	      "a certificate the server does not trust: exit 1, one line: %s", out);
	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d --tls-cert %s --tls-key %s "
		 "--tls-client-ca %s", d.port, pki_path("server1.pem"), pki_path("server1.key"),
		 flags[2]);
	CHECK(probe("", args, out, sizeof(out), NULL) == 1 && one_line(out),
	      "a server-only certificate is no client's: exit 1, one line: %s", out);
	dlockd_stop(&d, 5000);

	snprintf(args, sizeof(args), " --listen 127.0.0.1:%d --tls-cert %s --tls-key %s",
		 H_dlockd.port, flags[0], flags[1]);
	CHECK(probe("", args, out, sizeof(out), NULL) == 1 && strstr(out, "TLS handshake"),
	      "TLS to a plain dlockd: exit 1 naming the handshake: %s", out);
}
