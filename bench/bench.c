/* bench.c -- `make bench`: dlockd against the Redis floor.
 *
 * Starts its own redis-server and dlockd on loopback ports, runs each
 * scenario against dlockd over HTTP/1.1 keep-alive and, as the baseline,
 * the same embedded Lua scripts called directly (as functions, FCALL) over hiredis
 * at the same concurrency, then prints a Markdown table and writes
 * bench/results/latest.json (jansson, read back and checked). Absolute
 * numbers drift on a shared machine; the ratios against the floor measured
 * in the same run are the result. A scenario whose dlockd side or floor
 * has errors or measured nothing fails the bench (exit 1), by name.
 * With --compare OLD NEW it runs two dlockd binaries in alternating rounds
 * instead and prints the median ratio new/old (bench/README.md).
 *
 *   build/bench/bench [--seconds S] [--rounds N] [--quick] [--only WORD]
 *                     [--json FILE] [BIN | --compare OLD NEW]   (make bench) */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ----- The embedded scripts (build/lua_scripts.o) ----- */

struct lua_source {
	const char *name;
	const char *function;
	const char *source;
};
extern const struct lua_source lua_sources[];
extern const unsigned lua_sources_count;
extern const char lua_library[];

static const struct lua_source *script_of(const char *name)
{
	for (unsigned i = 0; i < lua_sources_count; i++)
		if (!strcmp(lua_sources[i].name, name))
			return &lua_sources[i];
	fprintf(stderr, "bench: no script %s\n", name);
	exit(2);
}

/* ----- Time and processes ----- */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A free loopback port, or -1 (said on stderr). Thousands of connections
 * closed by a scenario (the waiters') leave their ports in TIME_WAIT for a
 * minute: a bind to port 0 can then find none for a while, so it is
 * retried for up to 10 s. */
static int free_port(void)
{
	for (int tries = 0; tries < 100; tries++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		socklen_t len = sizeof(a);
		int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1, err;

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
			port = ntohs(a.sin_port);
		err = errno;
		close(fd);
		if (port > 0)
			return port;
		if (tries == 99)
			fprintf(stderr, "bench: no free loopback port: %s\n", strerror(err));
		else
			sleep_ms(100);
	}
	return -1;
}

static pid_t spawn(const char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static int tcp_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	return fd;
}

static bool wait_port(int port)
{
	for (int i = 0; i < 500; i++) {
		int fd = tcp_connect(port);

		if (fd >= 0) {
			close(fd);
			return true;
		}
		sleep_ms(10);
	}
	return false;
}

/* RSS in KiB and thread count of pid, from /proc. */
static void proc_usage(pid_t pid, long *rss_kib, int *threads)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	*rss_kib = -1;
	*threads = -1;
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", rss_kib);
		sscanf(line, "Threads: %d", threads);
	}
	if (f)
		fclose(f);
}

/* ----- A minimal HTTP/1.1 keep-alive client ----- */

/* While set, conn_open() speaks TLS (GnuTLS, the certificate checked
 * against tls_trust for 127.0.0.1): the dlockd running is an HTTPS one. */
static bool use_tls;
/* --redis-ca for the dlockd started next (redis_tls_cost), NULL: none */
static const char *redis_ca;
/* --max-fair-queue for the dlockd started next (many_waiters), NULL: its
 * default (1,000, which would refuse the rest of 10,000 fair waiters) */
static const char *fair_cap;
static gnutls_certificate_credentials_t tls_trust;

struct conn {
	int fd;
	gnutls_session_t tls;	/* NULL: plain */
	char buf[1 << 17];	/* room for a whole /metrics page */
	size_t len;		/* bytes in buf */
	/* over TLS, what one read(2) brought and GnuTLS has not taken: it
	 * asks for a record's 5-byte header, then for the rest, and each ask
	 * would be a read of its own */
	unsigned char raw[1 << 14];
	size_t raw_at, raw_len;
};

static ssize_t tls_pull(gnutls_transport_ptr_t p, void *buf, size_t n)
{
	struct conn *c = p;

	if (c->raw_at == c->raw_len) {
		ssize_t k = read(c->fd, c->raw, sizeof(c->raw));

		if (k <= 0)
			return k;
		c->raw_at = 0;
		c->raw_len = (size_t)k;
	}
	if (n > c->raw_len - c->raw_at)
		n = c->raw_len - c->raw_at;
	memcpy(buf, c->raw + c->raw_at, n);
	c->raw_at += n;
	return (ssize_t)n;
}

static int tls_pull_timeout(gnutls_transport_ptr_t p, unsigned ms)
{
	struct conn *c = p;
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };

	if (c->raw_at < c->raw_len)
		return 1;
	return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static ssize_t tls_push(gnutls_transport_ptr_t p, const void *buf, size_t n)
{
	return write(((struct conn *)p)->fd, buf, n);
}

static void conn_close(struct conn *c)
{
	if (c->tls)
		gnutls_deinit(c->tls);
	c->tls = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int conn_open(struct conn *c, int port)
{
	int rc;

	c->len = 0;
	c->tls = NULL;
	c->fd = tcp_connect(port);
	if (c->fd < 0 || !use_tls)
		return c->fd < 0 ? -1 : 0;
	if (gnutls_init(&c->tls, GNUTLS_CLIENT) < 0) {
		c->tls = NULL;
		conn_close(c);
		return -1;
	}
	gnutls_set_default_priority(c->tls);
	gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, tls_trust);
	gnutls_session_set_verify_cert(c->tls, "127.0.0.1", 0);
	c->raw_at = c->raw_len = 0;
	gnutls_transport_set_ptr(c->tls, c);
	gnutls_transport_set_pull_function(c->tls, tls_pull);
	gnutls_transport_set_pull_timeout_function(c->tls, tls_pull_timeout);
	gnutls_transport_set_push_function(c->tls, tls_push);
	do
		rc = gnutls_handshake(c->tls);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	if (rc < 0) {
		fprintf(stderr, "bench: TLS handshake: %s\n", gnutls_strerror(rc));
		conn_close(c);
		return -1;
	}
	return 0;
}

static ssize_t conn_write(struct conn *c, const void *p, size_t n)
{
	return c->tls ? gnutls_record_send(c->tls, p, n) : write(c->fd, p, n);
}

static ssize_t conn_read(struct conn *c, void *p, size_t n)
{
	ssize_t k;

	if (!c->tls)
		return read(c->fd, p, n);
	do
		k = gnutls_record_recv(c->tls, p, n);
	while (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED);
	return k;
}

/* Send one request without a body; read the response into c->buf. Returns
 * the status (body at *body, NUL-terminated), or -1. */
static int http_req(struct conn *c, const char *method, const char *path, const char **body)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Content-Length: 0\r\n\r\n", method, path);
	size_t hdr_end = 0, clen = 0;
	char *p;

	if (conn_write(c, req, (size_t)n) != n)
		return -1;
	c->len = 0;
	for (;;) {
		ssize_t k = conn_read(c, c->buf + c->len, sizeof(c->buf) - 1 - c->len);

		if (k <= 0)
			return -1;
		c->len += (size_t)k;
		c->buf[c->len] = '\0';
		if (!hdr_end && (p = strstr(c->buf, "\r\n\r\n"))) {
			char *cl = strcasestr(c->buf, "Content-Length:");

			hdr_end = (size_t)(p - c->buf) + 4;
			clen = cl ? strtoul(cl + 15, NULL, 10) : 0;
		}
		if (hdr_end && c->len >= hdr_end + clen)
			break;
	}
	if (body)
		*body = c->buf + hdr_end;
	return atoi(c->buf + 9);
}

static long long json_field(const char *body, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(body, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* ----- Settings, scenarios, results and failures ----- */

static int http_port, redis_port;
static pid_t redis_pid, dlockd_pid, replica_pid;
static const char *bench_bin;	/* the dlockd binary of the scenarios */
static const char *dlockd_bin;	/* the running dlockd's binary */
static const char *dlockd_since;	/* the scenario it was started in */
static int dlockd_serial;	/* dlockd starts so far: each logs to dlockd-<n>.log */
static char dlockd_log[200];	/* the running dlockd's */
/* the Sentinel and Cluster topologies' processes, stopped by pid */
static pid_t topo_pids[8];
static pid_t redis_tls_pid;	/* redis_tls_cost's redis-server, while it runs */
static int ntopo;
static double seconds = 3.0;
static const char *only;	/* --only WORD: scenarios whose name contains it */
static bool quick;		/* --quick: every scenario briefly, few clients */
/* Paired throughput runs alternate this many rounds and keep the median
 * (--rounds; --quick: 1, --compare: 5). */
#define MAX_ROUNDS 15
static int rounds = 3;

static bool wanted(const char *scenario)
{
	return !only || strstr(scenario, only);
}

/* The clients of a scenario written for n: --quick runs 1, 4 or 8. */
static int clients_for(int n)
{
	if (!quick || n <= 1)
		return n;
	return n <= 16 ? 4 : 8;
}

static char dir[128];

static void *xmalloc_or_die(void *p)
{
	if (!p) {
		fprintf(stderr, "bench: out of memory\n");
		exit(2);
	}
	return p;
}

static char *xstrdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xstrdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return xmalloc_or_die(n < 0 ? NULL : s);
}

/* A growing list of strings, each malloc'd and owned by the list. */
struct strs {
	char **v;
	size_t n, cap;
};

static void strs_add(struct strs *l, char *s)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = xmalloc_or_die(realloc(l->v, l->cap * sizeof(*l->v)));
	}
	l->v[l->n++] = s;
}

static void strs_free(struct strs *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	*l = (struct strs){ 0 };
}

static struct strs scenarios;	/* begun in this run, in order */
static struct strs failures;	/* "<scenario>: <why>", in order */
/* the scenario running (in scenarios; "start" before the first) */
static const char *current = "start";

/* A scenario starts if --only wants it; it is then expected to report
 * figures (checked at the end and in the JSON). */
static bool scenario_begin(const char *scenario)
{
	if (!wanted(scenario))
		return false;
	strs_add(&scenarios, xstrdup_printf("%s", scenario));
	current = scenarios.v[scenarios.n - 1];
	return true;
}

/* scenario failed: said now on stderr, again at the end, and the bench
 * exits 1. */
static void fail(const char *scenario, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *scenario, const char *fmt, ...)
{
	char why[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "bench: FAILED: %s: %s\n", scenario, why);
	strs_add(&failures, xstrdup_printf("%s: %s", scenario, why));
}

/* One figure of a scenario: a (dlockd, or --compare's new binary) against
 * b (the floor, the other side of a paired scenario, or the old binary). */
struct row {
	char *scenario, *metric;
	double a, b;		/* b NAN: no baseline for this figure */
	double ratio;		/* NAN: none */
	const char *unit;	/* a string literal */
};
static struct row *rows;
static size_t nrows, rows_cap;
/* what the two columns are, in the table and the JSON */
static const char *col_a = "dlockd", *col_b = "floor";

static void result_ratio(const char *scenario, const char *metric, double a, double b,
			 double ratio, const char *unit)
{
	struct row *r;

	if (nrows == rows_cap) {
		rows_cap = rows_cap ? 2 * rows_cap : 128;
		rows = xmalloc_or_die(realloc(rows, rows_cap * sizeof(*rows)));
	}
	r = &rows[nrows++];
	r->scenario = xstrdup_printf("%s", scenario);
	r->metric = xstrdup_printf("%s", metric);
	r->a = a;
	r->b = b;
	r->ratio = ratio;
	r->unit = unit;
	fprintf(stderr, "  %-40s %-22s %s %12.2f   %s %12.2f %s\n", scenario, metric, col_a, a,
		col_b, b, unit);
}

/* A figure; f < 0: it has no baseline. The ratio is d / f. */
static void result(const char *scenario, const char *metric, double d, double f, const char *unit)
{
	result_ratio(scenario, metric, d, f < 0 ? NAN : f, f > 0 ? d / f : NAN, unit);
}

static redisContext *redis_connect(void)
{
	redisContext *c = redisConnect("127.0.0.1", redis_port);

	if (!c || c->err) {
		fprintf(stderr, "bench: cannot reach redis\n");
		exit(2);
	}
	return c;
}


/* ----- Lock kinds, over HTTP and called directly (FCALL) ----- */

/* Every script's last two arguments are the command it publishes with
 * and its deadline in Redis' clock (lua/lib/common.lua), as scripts_run()
 * appends them after the operation's own: the floor publishes as dlockd
 * does on a standalone Redis, and its calls never expire. */
#define TAIL "publish 9007199254740991"

enum kind { K_LOCK, K_FAIR, K_WRITE, K_READ, K_SEM, K_COUNT };

/* The semaphore's limit in its rows: 4 permits. */
#define SEM_LIMIT "4"

static const struct kind_info {
	const char *label;
	const char *path;		/* printf: name */
	const char *acquire, *release;	/* script names */
	const char *channel;		/* printf: name (fair: then ":owner") */
} kinds[K_COUNT] = {
	[K_LOCK] = { "lock", "/locks/%s", "lock_acquire", "lock_release",
		     "redisson_lock__channel:{%s}" },
	[K_FAIR] = { "fairlock", "/fairlocks/%s", "fair_acquire", "fair_release",
		     "redisson_lock__channel:{%s}" },
	[K_WRITE] = { "rwlock write", "/rwlocks/%s/write", "rw_write_acquire", "rw_write_release",
		      "redisson_rwlock:{%s}" },
	[K_READ] = { "rwlock read", "/rwlocks/%s/read", "rw_read_acquire", "rw_read_release",
		     "redisson_rwlock:{%s}" },
	[K_SEM] = { "semaphore", "/semaphores/%s", "sem_acquire", "sem_release",
		    "redisson_sc:{%s}" },
};

/* The floor: one client's connections and the scripts it calls. */
struct floor_client {
	redisContext *cmd, *sub;
	char acq_sha[64], rel_sha[64];	/* an SHA (EVALSHA), or a function */
	char err[256];		/* why the last call failed */
};

/* A script's reply the floor cannot use: fc->err says what it was. */
static void floor_bad_reply(struct floor_client *fc, const char *script, const redisReply *r)
{
	if (!r)
		snprintf(fc->err, sizeof(fc->err), "script %s: no reply (%s)", script,
			 fc->cmd->errstr);
	else if (r->type == REDIS_REPLY_ERROR)
		snprintf(fc->err, sizeof(fc->err), "script %s: %s", script, r->str);
	else
		snprintf(fc->err, sizeof(fc->err), "script %s: a reply of type %d", script,
			 r->type);
}

/* The function of script name, as dlockd calls it (FCALL), its library
 * loaded on c's Redis first. */
static void script_fn(redisContext *c, const char *name, char fn[64])
{
	redisReply *r = redisCommand(c, "FUNCTION LOAD %s", lua_library);

	if (!r || (r->type != REDIS_REPLY_STRING &&
		   !(r->type == REDIS_REPLY_ERROR && strstr(r->str, "already exists")))) {
		fprintf(stderr, "bench: FUNCTION LOAD failed: %s\n", r ? r->str : "no reply");
		exit(2);
	}
	snprintf(fn, 64, "%s", script_of(name)->function);
	freeReplyObject(r);
}

/* FCALL acquire; 1 acquired (token set), 0 held (pttl set), -1 error. */
static int floor_acquire(struct floor_client *fc, enum kind k, const char *name,
			 const char *owner, bool queue, long long *token, long long *pttl)
{
	char tok[300], q[300], dl[300], ch[300], tag[300], wr[300], own[300], st[300];
	const char *life = queue ? "5000" : "0";
	redisReply *r;
	int res = -1;

	/* ARGV: lease, owner, queue life, reentrant "0", principal "" (auth off) */
	snprintf(tok, sizeof(tok), "redisson_lock_token:{%s}", name);
	snprintf(own, sizeof(own), "dlockd_lock_owners:{%s}", name);
	/* the watchers' channel: the scripts publish the change there */
	snprintf(st, sizeof(st), "dlockd_lock_state:{%s}", name);
	switch (k) {
	case K_LOCK:
		r = redisCommand(fc->cmd, "FCALL %s 4 %s %s %s %s 30000 %s 0 0 %s " TAIL, fc->acq_sha,
				 name, tok, own, st, owner, "");
		break;
	case K_FAIR:
		snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
		snprintf(dl, sizeof(dl), "redisson_lock_timeout:{%s}", name);
		snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
		/* a fair acquire also takes the cap on its queue: dlockd's default */
		r = redisCommand(fc->cmd, "FCALL %s 7 %s %s %s %s %s %s %s 30000 %s %s 0 %s 1000 "
				 TAIL, fc->acq_sha, name, tok, q, dl, ch, own, st, owner, life, "");
		break;
	case K_WRITE:
		snprintf(tag, sizeof(tag), "{%s}", name);
		snprintf(wr, sizeof(wr), "dlockd_rwlock_writers:{%s}", name);
		r = redisCommand(fc->cmd, "FCALL %s 6 %s %s %s %s %s %s 30000 %s %s 0 %s 1000 "
				 TAIL, fc->acq_sha, name, tok, tag, wr, own, st, owner, life, "");
		break;
	case K_SEM:
		/* ARGV: lease, owner, place life, limit, principal, no value */
		snprintf(tag, sizeof(tag), "{%s}:timeout", name);
		snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
		snprintf(wr, sizeof(wr), "dlockd_sem_waiters:{%s}", name);
		r = redisCommand(fc->cmd, "FCALL %s 7 %s %s %s %s %s %s %s 30000 %s %s " SEM_LIMIT
				 " %s 0 %s " TAIL, fc->acq_sha, name, tag, ch, tok, own, wr, st, owner,
				 life, "", "");
		break;
	default:
		/* a read also takes the caps on read holds: dlockd's defaults */
		snprintf(tag, sizeof(tag), "{%s}", name);
		snprintf(wr, sizeof(wr), "dlockd_rwlock_writers:{%s}", name);
		r = redisCommand(fc->cmd, "FCALL %s 6 %s %s %s %s %s %s 30000 %s %s 0 %s 64 256 "
				 TAIL, fc->acq_sha, name, tok, tag, wr, own, st, owner, life, "");
	}
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
	    (r->element[0]->integer == 1 || r->element[0]->integer == 0)) {
		res = r->element[0]->integer == 1;
		if (res)
			*token = r->element[1]->integer;
		else
			*pttl = r->element[1]->integer;
	} else if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1) {
		snprintf(fc->err, sizeof(fc->err), "FCALL %s: refused (%lld)", kinds[k].acquire,
			 r->element[0]->integer);
	} else {
		floor_bad_reply(fc, kinds[k].acquire, r);
	}
	if (r)
		freeReplyObject(r);
	return res;
}

static int floor_release(struct floor_client *fc, enum kind k, const char *name, const char *owner)
{
	char q[300], dl[300], ch[300], tag[300], own[300], st[300];
	redisReply *r;
	int ok;

	/* ARGV: owner, principal "" (auth off) */
	snprintf(ch, sizeof(ch), kinds[k].channel, name);
	snprintf(own, sizeof(own), "dlockd_lock_owners:{%s}", name);
	snprintf(st, sizeof(st), "dlockd_lock_state:{%s}", name);
	switch (k) {
	case K_LOCK:
		r = redisCommand(fc->cmd, "FCALL %s 3 %s %s %s %s %s " TAIL, fc->rel_sha, name, ch,
				 own, owner, "");
		break;
	case K_FAIR:
		snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
		snprintf(dl, sizeof(dl), "redisson_lock_timeout:{%s}", name);
		r = redisCommand(fc->cmd, "FCALL %s 6 %s %s %s %s %s %s %s %s " TAIL, fc->rel_sha, name,
				 q, dl, ch, own, st, owner, "");
		break;
	case K_WRITE:
		snprintf(tag, sizeof(tag), "{%s}", name);
		r = redisCommand(fc->cmd, "FCALL %s 4 %s %s %s %s %s %s " TAIL, fc->rel_sha, name, ch,
				 tag, own, owner, "");
		break;
	case K_SEM:
		snprintf(tag, sizeof(tag), "{%s}:timeout", name);
		r = redisCommand(fc->cmd, "FCALL %s 4 %s %s %s %s %s %s " TAIL, fc->rel_sha, name, tag,
				 ch, own, owner, "");
		break;
	default:
		snprintf(tag, sizeof(tag), "{%s}", name);
		r = redisCommand(fc->cmd, "FCALL %s 5 %s %s %s %s %s %s %s " TAIL, fc->rel_sha, name,
				 ch, tag, own, st, owner, "");
	}
	/* {1, holds left, ...}: 0, or a refusal, would be a floor gone wrong */
	ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->integer == 1;
	if (!ok && r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1)
		snprintf(fc->err, sizeof(fc->err), "FCALL %s: refused (%lld)", kinds[k].release,
			 r->element[0]->integer);
	else if (!ok)
		floor_bad_reply(fc, kinds[k].release, r);
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* Wait for any message on the floor client's subscription, at most ms. */
static void floor_wait_message(struct floor_client *fc, long long ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	void *r = NULL;

	redisSetTimeout(fc->sub, tv);
	if (redisGetReply(fc->sub, &r) == REDIS_OK && r)
		freeReplyObject(r);
	else if (fc->sub->err) {
		/* a timeout kills a hiredis context: reconnect and resubscribe */
		redisFree(fc->sub);
		fc->sub = NULL;
	}
}

/* ----- One run: N clients for `seconds`, over HTTP or the floor ----- */

enum mode { UNCONTENDED, HOT };

/* Who serves a run: dlockd over HTTP; its scripts called directly (what
 * the HTTP layer costs); Redisson's own lock scripts (what taking a lock
 * on this Redis costs at all: the plain lock only). */
enum side { SIDE_DLOCKD, SIDE_SCRIPTS, SIDE_REDISSON };

struct run {
	enum kind kind;
	enum mode mode;
	enum side side;
	int clients;
	char name[96];		/* the hot lock */
	int64_t until_us;
	long long cycles;	/* completed acquire+release cycles */
	int errors;		/* clients that stopped on an error */
	int error_claimed;	/* the first of them writes error */
	char error[300];
	/* hand-off latency: when each token was granted and released; the
	 * grant with the next higher token is the next holder's (tokens
	 * follow Redis' clock, so they grow by more than 1 a grant) */
	struct stamp *grants, *releases;
	size_t ngrants, nreleases;
};

struct stamp {
	long long token;
	int64_t at_us;
};

#define MAX_TOKENS (1 << 21)

struct client_arg {
	struct run *run;
	int id;
};

/* A client stops on an error: counted, and the first one's said. */
static void run_error(struct run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_error(struct run *run, const char *fmt, ...)
{
	va_list ap;

	__atomic_add_fetch(&run->errors, 1, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&run->error_claimed, 1, __ATOMIC_ACQ_REL))
		return;
	va_start(ap, fmt);
	vsnprintf(run->error, sizeof(run->error), fmt, ap);
	va_end(ap);
}

static void note(struct stamp *v, size_t *n, long long token)
{
	size_t i;

	if (!v || token <= 0)
		return;
	i = __atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
	if (i < MAX_TOKENS)
		v[i] = (struct stamp){ token, now_us() };
}

static void note_grant(struct run *run, long long token)
{
	note(run->grants, &run->ngrants, token);
}

static void note_release(struct run *run, long long token)
{
	note(run->releases, &run->nreleases, token);
}

static int cmp_stamp(const void *a, const void *b)
{
	long long x = ((const struct stamp *)a)->token, y = ((const struct stamp *)b)->token;

	return (x > y) - (x < y);
}

/* The status line and body of a refused request, for run_error. */
static const char *answer_of(struct conn *c, int status)
{
	char *eol;

	if (status < 0)
		return "the connection failed";
	eol = strstr(c->buf, "\r\n\r\n");
	return eol ? eol + 4 : c->buf;
}

static void *http_client(void *arg)
{
	struct client_arg *ca = arg;
	struct run *run = ca->run;
	char name[160], base[256], acq[400], rel[400];
	struct conn c;
	long long i = 0;
	int st;

	if (conn_open(&c, http_port) < 0) {
		run_error(run, "cannot connect to dlockd on port %d", http_port);
		return NULL;
	}
	while (now_us() < run->until_us) {
		const char *body;
		long long token;

		if (run->mode == HOT)
			snprintf(name, sizeof(name), "%s", run->name);
		else
			snprintf(name, sizeof(name), "%s-%d-%lld", run->name, ca->id, i++ % 1000);
		snprintf(base, sizeof(base), kinds[run->kind].path, name);
		snprintf(acq, sizeof(acq), "%s?owner=c%d&ttl_ms=30000%s%s", base, ca->id,
			 run->mode == HOT ? "&wait_ms=60000" : "",
			 run->kind == K_SEM ? "&limit=" SEM_LIMIT : "");
		snprintf(rel, sizeof(rel), "%s?owner=c%d", base, ca->id);
		if ((st = http_req(&c, "PUT", acq, &body)) != 200) {
			run_error(run, "PUT %s: %d %.200s", acq, st, answer_of(&c, st));
			break;
		}
		token = json_field(body, "fencing_token");
		note_grant(run, token);
		note_release(run, token);
		if ((st = http_req(&c, "DELETE", rel, NULL)) != 200) {
			run_error(run, "DELETE %s: %d %.200s", rel, st, answer_of(&c, st));
			break;
		}
		__atomic_add_fetch(&run->cycles, 1, __ATOMIC_RELAXED);
	}
	conn_close(&c);
	return NULL;
}

static void *floor_client(void *arg)
{
	struct client_arg *ca = arg;
	struct run *run = ca->run;
	struct floor_client fc = { 0 };
	char name[160], owner[32], ch[400];
	long long i = 0;

	fc.cmd = redis_connect();
	script_fn(fc.cmd, kinds[run->kind].acquire, fc.acq_sha);
	script_fn(fc.cmd, kinds[run->kind].release, fc.rel_sha);
	snprintf(owner, sizeof(owner), "c%d", ca->id);
	while (now_us() < run->until_us) {
		long long token = 0, pttl = 0;
		int got;

		if (run->mode == HOT)
			snprintf(name, sizeof(name), "%s", run->name);
		else
			snprintf(name, sizeof(name), "%s-%d-%lld", run->name, ca->id, i++ % 1000);
		while ((got = floor_acquire(&fc, run->kind, name, owner, run->mode == HOT, &token,
					    &pttl)) == 0) {
			/* the naive client: subscribe once, wait for "0", retry */
			if (!fc.sub) {
				redisReply *r;

				fc.sub = redis_connect();
				snprintf(ch, sizeof(ch), kinds[run->kind].channel, name);
				if (run->kind == K_FAIR)
					snprintf(ch + strlen(ch), sizeof(ch) - strlen(ch), ":%s", owner);
				r = redisCommand(fc.sub, "SUBSCRIBE %s", ch);
				if (r)
					freeReplyObject(r);
				continue;	/* subscribe, then try again */
			}
			if (now_us() >= run->until_us + 5000000) {
				snprintf(fc.err, sizeof(fc.err), "%s still not acquired 5 s after "
					 "the run's end", name);
				break;
			}
			floor_wait_message(&fc, pttl > 0 && pttl < 1000 ? pttl : 1000);
		}
		if (got != 1) {
			run_error(run, "%s", fc.err);
			break;
		}
		note_grant(run, token);
		note_release(run, token);
		if (floor_release(&fc, run->kind, name, owner) < 0) {
			run_error(run, "%s", fc.err);
			break;
		}
		__atomic_add_fetch(&run->cycles, 1, __ATOMIC_RELAXED);
	}
	redisFree(fc.cmd);
	if (fc.sub)
		redisFree(fc.sub);
	return NULL;
}

/* Redisson's RLock scripts, as its RedissonLock sends them (written from
 * a reading of RedissonLock.tryLockInnerAsync and unlockInnerAsync; the
 * fenced lock's token INCR is not in them). Acquire: KEYS N; ARGV
 * lease, owner field; nil when taken, else N's pttl. Release: KEYS N,
 * channel, unlock latch; ARGV "0", lease, field, publish command, latch
 * lifetime; 1 released, 0 a hold left, nil not held. */
static const char redisson_acquire_lua[] =
	"if redis.call('exists', KEYS[1]) == 0 or "
	"   redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
	"  redis.call('hincrby', KEYS[1], ARGV[2], 1) "
	"  redis.call('pexpire', KEYS[1], ARGV[1]) "
	"  return nil "
	"end "
	"return redis.call('pttl', KEYS[1])";
static const char redisson_release_lua[] =
	"local latched = redis.call('get', KEYS[3]) "
	"if latched ~= false then return tonumber(latched) end "
	"if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end "
	"local left = redis.call('hincrby', KEYS[1], ARGV[3], -1) "
	"if left > 0 then "
	"  redis.call('pexpire', KEYS[1], ARGV[2]) "
	"  redis.call('set', KEYS[3], 0, 'px', ARGV[5]) "
	"  return 0 "
	"end "
	"redis.call('del', KEYS[1]) "
	"redis.call(ARGV[4], KEYS[2], ARGV[1]) "
	"redis.call('set', KEYS[3], 1, 'px', ARGV[5]) "
	"return 1";

static void redisson_sha(redisContext *c, const char *src, char sha[41])
{
	redisReply *r = redisCommand(c, "SCRIPT LOAD %s", src);

	if (!r || r->type != REDIS_REPLY_STRING) {
		fprintf(stderr, "bench: SCRIPT LOAD of a Redisson script failed\n");
		exit(2);
	}
	memcpy(sha, r->str, 41);
	freeReplyObject(r);
}

/* A Redisson client's lock cycles (the plain lock): tryLock with a lease,
 * waiting on the lock's channel as Redisson does, then unlock and the
 * DEL of its unlock latch. */
static void *redisson_client(void *arg)
{
	struct client_arg *ca = arg;
	struct run *run = ca->run;
	struct floor_client fc = { 0 };
	char name[160], field[64], ch[300], latch[300];
	long long i = 0;

	fc.cmd = redis_connect();
	redisson_sha(fc.cmd, redisson_acquire_lua, fc.acq_sha);
	redisson_sha(fc.cmd, redisson_release_lua, fc.rel_sha);
	/* "<client uuid>:<thread id>" */
	snprintf(field, sizeof(field), "9c345276-aa6e-44c1-b478-%012d:%d", (int)getpid(), ca->id);
	while (now_us() < run->until_us) {
		redisReply *r;
		bool held = false;

		if (run->mode == HOT)
			snprintf(name, sizeof(name), "%s", run->name);
		else
			snprintf(name, sizeof(name), "%s-%d-%lld", run->name, ca->id, i++ % 1000);
		snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
		for (;;) {
			long long pttl = 0;

			r = redisCommand(fc.cmd, "EVALSHA %s 1 %s 30000 %s", fc.acq_sha, name, field);
			if (!r || (r->type != REDIS_REPLY_NIL && r->type != REDIS_REPLY_INTEGER)) {
				floor_bad_reply(&fc, "Redisson's lock", r);
				if (r)
					freeReplyObject(r);
				break;
			}
			held = r->type == REDIS_REPLY_NIL;
			pttl = held ? 0 : r->integer;
			freeReplyObject(r);
			if (held)
				break;
			if (!fc.sub) {
				fc.sub = redis_connect();
				r = redisCommand(fc.sub, "SUBSCRIBE %s", ch);
				if (r)
					freeReplyObject(r);
				continue;
			}
			if (now_us() >= run->until_us + 5000000) {
				snprintf(fc.err, sizeof(fc.err), "%s still not acquired 5 s after "
					 "the run's end", name);
				break;
			}
			floor_wait_message(&fc, pttl > 0 && pttl < 1000 ? pttl : 1000);
		}
		if (!held) {
			run_error(run, "%s", fc.err);
			break;
		}
		snprintf(latch, sizeof(latch), "redisson_unlock_latch:{%s}:%032d", name, ca->id);
		r = redisCommand(fc.cmd, "EVALSHA %s 3 %s %s %s 0 30000 %s publish 1500", fc.rel_sha,
				 name, ch, latch, field);
		if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
			floor_bad_reply(&fc, "Redisson's unlock", r);
			if (r)
				freeReplyObject(r);
			run_error(run, "%s", fc.err);
			break;
		}
		freeReplyObject(r);
		r = redisCommand(fc.cmd, "DEL %s", latch);
		if (r)
			freeReplyObject(r);
		__atomic_add_fetch(&run->cycles, 1, __ATOMIC_RELAXED);
	}
	redisFree(fc.cmd);
	if (fc.sub)
		redisFree(fc.sub);
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

struct outcome {
	double per_s;
	double p50_ms, p99_ms, max_ms;	/* hand-off latency (HOT) */
	size_t handoffs;		/* ... measured */
	int errors;
	char error[300];		/* the first error, when errors */
	long long cycles;
};

static void *redisson_client(void *arg);

static struct outcome run_once(enum kind k, enum mode m, enum side side, int clients,
			       const char *tag)
{
	static int serial;
	static void *(*const client_of[])(void *) = {
		[SIDE_DLOCKD] = http_client, [SIDE_SCRIPTS] = floor_client,
		[SIDE_REDISSON] = redisson_client,
	};
	struct run run = { .kind = k, .mode = m, .side = side, .clients = clients };
	pthread_t *t = xmalloc_or_die(calloc((size_t)clients, sizeof(*t)));
	struct client_arg *args = xmalloc_or_die(calloc((size_t)clients, sizeof(*args)));
	struct outcome o = { 0 };
	int64_t t0;
	int started = 0;

	snprintf(run.name, sizeof(run.name), "bench-%s-%d-%d", tag, getpid(), serial++);
	if (m == HOT) {
		run.grants = xmalloc_or_die(calloc(MAX_TOKENS, sizeof(*run.grants)));
		run.releases = xmalloc_or_die(calloc(MAX_TOKENS, sizeof(*run.releases)));
	}
	t0 = now_us();
	run.until_us = t0 + (int64_t)(seconds * 1e6);
	for (int i = 0; i < clients; i++) {
		int rc;

		args[i] = (struct client_arg){ &run, i };
		rc = pthread_create(&t[i], NULL, client_of[side], &args[i]);
		if (rc) {
			run_error(&run, "cannot start client %d: %s", i, strerror(rc));
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	o.per_s = (double)run.cycles / ((double)(now_us() - t0) / 1e6);
	o.errors = run.errors;
	memcpy(o.error, run.error, sizeof(o.error));
	o.cycles = run.cycles;
	if (m == HOT) {
		int64_t *lat = xmalloc_or_die(calloc(MAX_TOKENS, sizeof(int64_t)));
		size_t n = 0, ng = run.ngrants < MAX_TOKENS ? run.ngrants : MAX_TOKENS;
		size_t nr = run.nreleases < MAX_TOKENS ? run.nreleases : MAX_TOKENS;

		/* a release is noted just before its DELETE is sent, a grant
		 * when its answer arrives; the next grant in token order is
		 * the hand-off's */
		qsort(run.grants, ng, sizeof(*run.grants), cmp_stamp);
		qsort(run.releases, nr, sizeof(*run.releases), cmp_stamp);
		for (size_t i = 0; i + 1 < ng; i++) {
			struct stamp *rel = bsearch(&run.grants[i], run.releases, nr,
						    sizeof(*run.releases), cmp_stamp);

			if (rel && run.grants[i + 1].at_us >= rel->at_us)
				lat[n++] = run.grants[i + 1].at_us - rel->at_us;
		}
		qsort(lat, n, sizeof(*lat), cmp_i64);
		if (n) {
			o.p50_ms = (double)lat[n / 2] / 1000.0;
			o.p99_ms = (double)lat[n * 99 / 100] / 1000.0;
			o.max_ms = (double)lat[n - 1] / 1000.0;
		}
		o.handoffs = n;
		free(lat);
		free(run.grants);
		free(run.releases);
	}
	free(t);
	free(args);
	return o;
}

/* A run that had errors or measured nothing fails its scenario, saying
 * which side (side: "floor", "dlockd", "https", ...) and why. Returns
 * whether it was sound. */
static bool check_outcome(const char *scenario, const char *side, const struct outcome *o,
			  enum mode m)
{
	if (o->errors)
		fail(scenario, "%s: %d client(s) stopped on an error; the first: %s", side,
		     o->errors, o->error);
	else if (!(o->per_s > 0) || !isfinite(o->per_s))
		fail(scenario, "%s: no lock cycle completed (%.2f /s)", side, o->per_s);
	else if (m == HOT && !o->handoffs)
		fail(scenario, "%s: no hand-off measured", side);
	else
		return true;
	return false;
}

/* ----- Many waiters: one epoll loop holds every connection ----- */

static void start_dlockd(const char *bin);
static void start_dlockd_sync(const char *bin, const char *replicas);
static void start_dlockd_url(const char *bin, const char *redis_url, const char *replicas);

struct waiter_conn {
	int fd;
	int state;		/* 0 waiting for the grant, 1 for the release, 2 done */
	char name[96];
	int owner;
	char buf[1024];
	size_t len;
};

/* A complete response in w->buf? Returns its status, 0 if not yet. */
static int response_ready(struct waiter_conn *w)
{
	char *end = strstr(w->buf, "\r\n\r\n"), *cl;
	size_t need;

	if (!end)
		return 0;
	cl = strcasestr(w->buf, "Content-Length:");
	need = (size_t)(end - w->buf) + 4 + (cl ? strtoul(cl + 15, NULL, 10) : 0);
	if (w->len < need)
		return 0;
	return atoi(w->buf + 9);
}

static void send_req(int fd, const char *method, const char *path)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Content-Length: 0\r\n\r\n", method, path);

	if (write(fd, req, (size_t)n) != n)
		fprintf(stderr, "bench: short write\n");
}

/* Connect w (number i) to dlockd and have ep watch it; -1 (counted by
 * the caller) when the connection failed. */
static int connect_one(struct waiter_conn *w, int ep, int i)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };

	w->fd = tcp_connect(http_port);
	if (w->fd < 0) {
		fprintf(stderr, "bench: connect %d failed: %s\n", i, strerror(errno));
		w->state = 2;
		return -1;
	}
	fcntl(w->fd, F_SETFL, O_NONBLOCK);
	epoll_ctl(ep, EPOLL_CTL_ADD, w->fd, &ev);
	return 0;
}

/* Poll /metrics every 50 ms until the gauge series (e.g. "dlockd_waiters")
 * is at least want, at most 60 s; returns how long that took (us), or -1
 * if it never got there (said on stderr). */
static int64_t wait_gauge(struct conn *ctl, const char *series, long long want)
{
	int64_t t0 = now_us();
	char pat[64];

	snprintf(pat, sizeof(pat), "\n%s ", series);
	for (;;) {
		const char *body, *p;
		long long got = -1;

		if (http_req(ctl, "GET", "/metrics", &body) == 200 && (p = strstr(body, pat)))
			got = strtoll(p + strlen(pat), NULL, 10);
		if (got >= want || now_us() - t0 > 60000000) {
			if (got < want) {
				fprintf(stderr, "bench: %s only %lld of %lld\n", series, got, want);
				return -1;
			}
			return now_us() - t0;
		}
		sleep_ms(50);
	}
}

/* Read what came on w: its response's status once whole, 0 while not, -1
 * when the connection ended (then ep no longer watches it). */
static int read_some(struct waiter_conn *w, int ep)
{
	ssize_t got = read(w->fd, w->buf + w->len, sizeof(w->buf) - 1 - w->len);

	if (got <= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, w->fd, NULL);
		return -1;
	}
	w->len += (size_t)got;
	w->buf[w->len] = '\0';
	return response_ready(w);
}

/* Close the n connections of w and free it, with ep, ctl and rc. */
static void close_all(struct waiter_conn *w, int n, int ep, struct conn *ctl, redisContext *rc)
{
	for (int i = 0; i < n; i++)
		if (w[i].fd >= 0)
			close(w[i].fd);
	close(ep);
	conn_close(ctl);
	redisFree(rc);
	free(w);
}

/* From one INFO commandstats: calls of every command but INFO (those run
 * inside scripts included: Redis 7 counts them) and of the script calls
 * alone (EVALSHA, EVAL and FCALL). */
static void redis_calls(redisContext *c, long long *total, long long *evalsha)
{
	redisReply *r = redisCommand(c, "INFO commandstats");
	const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : "";

	*total = *evalsha = 0;
	while ((p = strstr(p, "cmdstat_"))) {
		const char *calls = strstr(p, "calls=");
		long long n = calls ? strtoll(calls + 6, NULL, 10) : 0;

		if (strncmp(p, "cmdstat_info:", 13))
			*total += n;
		if (!strncmp(p, "cmdstat_evalsha:", 16) || !strncmp(p, "cmdstat_eval:", 13) ||
		    !strncmp(p, "cmdstat_fcall:", 14))
			*evalsha += n;
		p = calls ? calls : p + 8;
	}
	if (r)
		freeReplyObject(r);
}

/* How long an idle fair queue is watched: three refresh periods at the
 * default --queue-ttl-ms of 5 s. */
#define FAIR_IDLE_MS 5000

/* n waiters on `locks` locks (1, or one each) of kind ("locks" or
 * "fairlocks"); returns nothing, records rows. A fair queue is first left
 * idle for FAIR_IDLE_MS, to see what keeping its places costs. */
static void many_waiters(int n, int locks, const char *kind, const char *label)
{
	struct waiter_conn *w;
	int ep, done = 0, granted = 0, errors = 0;
	redisContext *rc;
	struct conn ctl;
	long rss0, rss;
	int thr0, thr;
	long long calls0, calls1, eval0, eval1, idle_calls = 0, idle_eval = 0;
	double idle_s = 0;
	int64_t t0, t_all_waiting;
	char path[256], scenario[96], cap[16];

	snprintf(scenario, sizeof(scenario), "%d %swaiters on %s", n,
		 strcmp(kind, "fairlocks") ? "" : "fair ", locks == 1 ? "1 lock" : "1 lock each");
	if (!scenario_begin(scenario))
		return;
	/* its own dlockd (the last one's heap is no baseline), whose cap on
	 * a fair queue takes every waiter: one refused fails the scenario */
	snprintf(cap, sizeof(cap), "%d", n);
	fair_cap = strcmp(kind, "fairlocks") ? NULL : cap;
	start_dlockd(bench_bin);
	fair_cap = NULL;
	w = xmalloc_or_die(calloc((size_t)n, sizeof(*w)));
	ep = epoll_create1(0);
	rc = redis_connect();
	if (conn_open(&ctl, http_port) < 0)
		fail(scenario, "cannot connect to dlockd");
	proc_usage(dlockd_pid, &rss0, &thr0);
	/* holders */
	for (int l = 0; l < locks; l++) {
		snprintf(path, sizeof(path), "/%s/mw-%s-%d-%d?owner=holder&ttl_ms=600000", kind,
			 label, getpid(), l);
		if (http_req(&ctl, "PUT", path, NULL) != 200) {
			fprintf(stderr, "bench: holder of %s not granted: %s\n", path, ctl.buf);
			errors++;
		}
	}
	for (int i = 0; i < n; i++) {
		w[i].owner = i;
		snprintf(w[i].name, sizeof(w[i].name), "mw-%s-%d-%d", label, getpid(), i % locks);
		if (connect_one(&w[i], ep, i) < 0) {
			errors++;
			done++;
			continue;
		}
		snprintf(path, sizeof(path), "/%s/%s?owner=w%d&ttl_ms=30000&wait_ms=240000", kind,
			 w[i].name, i);
		send_req(w[i].fd, "PUT", path);
	}
	/* until every request waits */
	t_all_waiting = wait_gauge(&ctl, "dlockd_waiters", n - errors);
	sleep_ms(500);
	proc_usage(dlockd_pid, &rss, &thr);
	if (!strcmp(kind, "fairlocks")) {
		/* nobody releases: only keeping the queue places costs */
		redis_calls(rc, &calls0, &eval0);
		t0 = now_us();
		sleep_ms(FAIR_IDLE_MS);
		redis_calls(rc, &calls1, &eval1);
		idle_s = (double)(now_us() - t0) / 1e6;
		idle_calls = calls1 - calls0;
		idle_eval = eval1 - eval0;
	}
	redis_calls(rc, &calls0, &eval0);

	/* release the holders; each waiter releases as soon as it is served */
	t0 = now_us();
	for (int l = 0; l < locks; l++) {
		snprintf(path, sizeof(path), "/%s/mw-%s-%d-%d?owner=holder", kind, label, getpid(),
			 l);
		if (http_req(&ctl, "DELETE", path, NULL) != 200)
			errors++;
	}
	while (done < n && now_us() - t0 < 120000000) {
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 1000);

		for (int e = 0; e < k; e++) {
			struct waiter_conn *c = &w[evs[e].data.u32];
			int status = read_some(c, ep);

			if (status < 0) {
				errors++;
				c->state = 2;
				done++;
				continue;
			}
			if (!status)
				continue;
			c->len = 0;
			if (c->state == 0) {
				if (status == 200)
					granted++;
				else
					errors++;
				snprintf(path, sizeof(path), "/%s/%s?owner=w%d", kind, c->name,
					 c->owner);
				send_req(c->fd, "DELETE", path);
				c->state = 1;
			} else if (c->state == 1) {
				c->state = 2;
				done++;
			}
		}
	}
	redis_calls(rc, &calls1, &eval1);
	result(scenario, "dlockd RSS idle", (double)rss0 / 1024.0, -1, "MiB");
	result(scenario, "dlockd RSS waiting", (double)rss / 1024.0, -1, "MiB");
	result(scenario, "threads idle", thr0, -1, "");
	result(scenario, "threads waiting", thr, -1, "");
	result(scenario, "time to all waiting", (double)t_all_waiting / 1e6, -1, "s");
	result(scenario, "time to drain", (double)(now_us() - t0) / 1e6, -1, "s");
	if (idle_s > 0) {
		result(scenario, "scripts/s idle", (double)idle_eval / idle_s, -1, "/s");
		result(scenario, "cmds/s idle incl. inside scripts", (double)idle_calls / idle_s, -1,
		       "/s");
	}
	result(scenario, "served exactly once", granted, n, "waiters");
	result(scenario, "errors", errors, 0, "");
	/* each hand-off: the holder's release script, the next waiter's
	 * acquire script (whose own release is the next hand-off's) */
	result(scenario, "scripts sent per hand-off", (double)(eval1 - eval0) / (granted ? granted : 1),
	       -1, "");
	result(scenario, "cmds incl. inside scripts", (double)(calls1 - calls0) / (granted ? granted : 1),
	       -1, "");
	if (t_all_waiting < 0)
		fail(scenario, "dlockd_waiters never reached %d", n - errors);
	if (errors || granted != n)
		fail(scenario, "%d of %d waiters served, %d error(s)", granted, n, errors);
	close_all(w, n, ep, &ctl, rc);
}

static int cmp_double(const void *a, const void *b);

/* CPU time pid's threads have run, in µs, from the scheduler's count
 * (/proc/PID/task/TID/schedstat, in ns: finer than the 10 ms ticks of
 * proc_cpu_us); 0 when it cannot be read. */
static double proc_sched_us(pid_t pid)
{
	char path[320];
	unsigned long long ns = 0, t;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return 0;
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		if ((f = fopen(path, "r"))) {
			if (fscanf(f, "%llu", &t) == 1)
				ns += t;
			fclose(f);
		}
	}
	closedir(d);
	return (double)ns / 1e3;
}

/* Page faults pid has taken that needed no I/O (minflt of /proc/PID/stat:
 * first touches of fresh memory); -1 when it cannot be read. */
static long long proc_minflt(pid_t pid)
{
	char path[64], buf[1024], *p;
	long long minflt = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	/* after "(comm)": state is field 3, minflt 10 */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %lld", &minflt) != 1)
		return -1;
	return minflt;
}

/* This thread's CPU time in µs. */
static double thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One change seen by the watchers: each answer's time from the change
 * (ms, sorted), and what dlockd and this client spent on the answers. */
struct watch_round {
	double *lat;		/* n of them; answered are set */
	int answered, errors;
	double cpu_us;		/* dlockd's threads' */
	double self_us;		/* this thread's */
	long long faults;	/* dlockd's minor page faults */
};

/* Make the change (method path on ctl: 200 expected) and read the answer
 * of each of the want watchers among w[0..n) (`changed: true`), into r. */
static void watch_round(struct waiter_conn *w, int ep, struct conn *ctl, const char *method,
			const char *path, int want, struct watch_round *r)
{
	double cpu0 = proc_sched_us(dlockd_pid), self0 = thread_cpu_us();
	long long flt0 = proc_minflt(dlockd_pid);
	int done = 0;
	int64_t t0 = now_us();

	if (http_req(ctl, method, path, NULL) != 200)
		r->errors++;
	while (done < want && now_us() - t0 < 60000000) {
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 1000);
		int64_t t = now_us();

		for (int e = 0; e < k; e++) {
			struct waiter_conn *c = &w[evs[e].data.u32];
			int status = read_some(c, ep);

			if (!status)
				continue;
			if (status == 200 && strstr(c->buf, "\"changed\":true"))
				r->lat[r->answered++] = (double)(t - t0) / 1000.0;
			else
				r->errors++;
			c->state = 2;
			done++;
			if (status > 0)
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
		}
	}
	r->cpu_us = proc_sched_us(dlockd_pid) - cpu0;
	r->faults = proc_minflt(dlockd_pid) - flt0;
	r->self_us = thread_cpu_us() - self0;
	qsort(r->lat, (size_t)r->answered, sizeof(double), cmp_double);
}

/* The figures of a round; label "" for the first change, else said after
 * each figure's name. */
static void watch_round_results(const char *scenario, const char *label,
				const struct watch_round *r)
{
	int a = r->answered ? r->answered : 1;
	char fig[96];

#define ROUND_FIG(what) (snprintf(fig, sizeof(fig), "%s%s", what, label), fig)
	result(scenario, ROUND_FIG("release to answer p50"), r->answered ? r->lat[a / 2] : -1, -1,
	       "ms");
	result(scenario, ROUND_FIG("release to answer p99"),
	       r->answered ? r->lat[a * 99 / 100] : -1, -1, "ms");
	result(scenario, ROUND_FIG("release to last answer"), r->answered ? r->lat[a - 1] : -1,
	       -1, "ms");
	result(scenario, ROUND_FIG("release to first answer"), r->answered ? r->lat[0] : -1, -1,
	       "ms");
	/* CPU time the load of the machine does not move much: dlockd's (its
	 * threads', from the change to the last answer read) and this
	 * client's own (one thread reads every answer), per answer */
	result(scenario, ROUND_FIG("dlockd CPU per answer"), r->cpu_us / a, -1, "us");
	/* libmicrohttpd clears a connection's 16 KiB pool after each answer
	 * (memorypool.c MHD_pool_reset): its pages first touched then fault */
	result(scenario, ROUND_FIG("dlockd page faults per answer"), (double)r->faults / a, -1, "");
	result(scenario, ROUND_FIG("client CPU per answer"), r->self_us / a, -1, "us");
#undef ROUND_FIG
}

/* n watches (GET ?index=T&wait_ms) of one held lock; once all wait, the
 * holder releases: how long from the release to each answer. Then the
 * same connections watch the free lock, and it is taken: the second
 * change, on connections that answered once (libmicrohttpd's pools of
 * them touched already). */
static void many_watchers(int n)
{
	struct waiter_conn *w;
	struct watch_round first = { 0 }, second = { 0 };
	int ep, errors = 0, watching = 0;
	redisContext *rc;
	struct conn ctl;
	const char *body;
	long rss0, rss;
	int thr0, thr;
	long long token = 0, calls0, calls1, eval0, eval1;
	int64_t t_all_watching;
	char name[96], path[256], scenario[96];

	snprintf(scenario, sizeof(scenario), "%d watchers on 1 lock", n);
	if (!scenario_begin(scenario))
		return;
	start_dlockd(bench_bin);
	w = xmalloc_or_die(calloc((size_t)n, sizeof(*w)));
	first.lat = xmalloc_or_die(calloc((size_t)n, sizeof(double)));
	second.lat = xmalloc_or_die(calloc((size_t)n, sizeof(double)));
	ep = epoll_create1(0);
	rc = redis_connect();
	if (conn_open(&ctl, http_port) < 0)
		fail(scenario, "cannot connect to dlockd");
	proc_usage(dlockd_pid, &rss0, &thr0);
	snprintf(name, sizeof(name), "mwatch-%d", getpid());
	snprintf(path, sizeof(path), "/locks/%s?owner=leader&ttl_ms=600000", name);
	if (http_req(&ctl, "PUT", path, &body) == 200)
		token = json_field(body, "fencing_token");
	else
		errors++;
	snprintf(path, sizeof(path), "/locks/%s?index=%lld&wait_ms=240000", name, token);
	for (int i = 0; i < n; i++) {
		if (connect_one(&w[i], ep, i) < 0) {
			errors++;
			continue;
		}
		send_req(w[i].fd, "GET", path);
		watching++;
	}
	t_all_watching = wait_gauge(&ctl, "dlockd_watches", watching);
	sleep_ms(500);
	proc_usage(dlockd_pid, &rss, &thr);
	redis_calls(rc, &calls0, &eval0);
	snprintf(path, sizeof(path), "/locks/%s?owner=leader", name);
	watch_round(w, ep, &ctl, "DELETE", path, watching, &first);
	redis_calls(rc, &calls1, &eval1);

	/* the second change: the answered connections watch the free lock */
	snprintf(path, sizeof(path), "/locks/%s?index=0&wait_ms=240000", name);
	watching = 0;
	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };

		if (w[i].fd < 0 || w[i].state != 2)
			continue;
		w[i].len = 0;
		w[i].state = 0;
		epoll_ctl(ep, EPOLL_CTL_ADD, w[i].fd, &ev);
		send_req(w[i].fd, "GET", path);
		watching++;
	}
	if (wait_gauge(&ctl, "dlockd_watches", watching) < 0)
		errors++;
	sleep_ms(500);
	snprintf(path, sizeof(path), "/locks/%s?owner=leader&ttl_ms=600000", name);
	watch_round(w, ep, &ctl, "PUT", path, watching, &second);

	result(scenario, "dlockd RSS idle", (double)rss0 / 1024.0, -1, "MiB");
	result(scenario, "dlockd RSS watching", (double)rss / 1024.0, -1, "MiB");
	result(scenario, "threads idle", thr0, -1, "");
	result(scenario, "threads watching", thr, -1, "");
	result(scenario, "time to all watching", (double)t_all_watching / 1e6, -1, "s");
	watch_round_results(scenario, "", &first);
	watch_round_results(scenario, ", second change", &second);
	result(scenario, "answered", first.answered, n, "watchers");
	result(scenario, "errors", errors + first.errors + second.errors, 0, "");
	/* the release, then the status reads: one per loop and change (the
	 * watches of a loop share theirs, watch.c), so near 0 per watcher */
	result(scenario, "scripts per watcher",
	       (double)(eval1 - eval0) / (first.answered ? first.answered : 1), -1, "");
	if (t_all_watching < 0)
		fail(scenario, "dlockd_watches never reached %d", n - errors);
	if (errors || first.errors || first.answered != n)
		fail(scenario, "%d of %d watchers answered, %d error(s)", first.answered, n,
		     errors + first.errors);
	if (second.errors || second.answered != first.answered)
		fail(scenario, "second change: %d of %d watchers answered, %d error(s)",
		     second.answered, first.answered, second.errors);
	free(first.lat);
	free(second.lat);
	close_all(w, n, ep, &ctl, rc);
}

/* ----- Set-up, the scenarios, the report ----- */

/* The last lines of a log, on stderr: what a dlockd that failed said
 * (a sanitizer's report among it). */
static void print_log_tail(const char *path, int lines)
{
	char buf[16384];
	FILE *f = fopen(path, "r");
	size_t n;
	long at;
	char *p;

	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	at = ftell(f);
	fseek(f, at > (long)sizeof(buf) - 1 ? at - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = buf + n;
	while (p > buf && lines > 0)
		if (*--p == '\n' && p[1])
			lines--;
	fprintf(stderr, "--- the end of %s:\n%s%s---\n", path, p == buf ? p : p + 1,
		n && buf[n - 1] != '\n' ? "\n" : "");
}

/* Stop the running dlockd (SIGTERM, 30 s, then SIGKILL). With check, one
 * that does not exit 0 -- a sanitizer's report, a crash, a hang -- fails
 * the scenario it was started in (and served until now). */
static void stop_dlockd(bool check)
{
	int status = 0;
	pid_t got = 0;

	if (dlockd_pid <= 0)
		return;
	kill(dlockd_pid, SIGTERM);
	for (int i = 0; i < 3000 && (got = waitpid(dlockd_pid, &status, WNOHANG)) == 0; i++)
		sleep_ms(10);
	if (got == 0) {
		kill(dlockd_pid, SIGKILL);
		waitpid(dlockd_pid, &status, 0);
		if (check)
			fail(dlockd_since, "its dlockd (%s) did not stop within 30 s of SIGTERM; "
			     "log %s", dlockd_bin, dlockd_log);
	} else if (check && got == dlockd_pid && !(WIFEXITED(status) && !WEXITSTATUS(status))) {
		if (WIFEXITED(status))
			fail(dlockd_since, "its dlockd (%s) exited with status %d; log %s", dlockd_bin,
			     WEXITSTATUS(status), dlockd_log);
		else
			fail(dlockd_since, "its dlockd (%s) ended by signal %d; log %s", dlockd_bin,
			     WIFSIGNALED(status) ? WTERMSIG(status) : -1, dlockd_log);
		print_log_tail(dlockd_log, 30);
	}
	dlockd_pid = 0;
}

/* Stop every process the bench started, by pid; with check, a dlockd that
 * ends badly fails the bench. */
static void stop_processes(bool check)
{
	stop_dlockd(check);
	for (int i = 0; i < ntopo; i++)
		if (topo_pids[i] > 0) {
			kill(topo_pids[i], SIGTERM);
			waitpid(topo_pids[i], NULL, 0);
			topo_pids[i] = 0;
		}
	ntopo = 0;
	if (redis_tls_pid > 0) {
		kill(redis_tls_pid, SIGTERM);
		waitpid(redis_tls_pid, NULL, 0);
		redis_tls_pid = 0;
	}
	if (replica_pid > 0) {
		kill(replica_pid, SIGTERM);
		waitpid(replica_pid, NULL, 0);
		replica_pid = 0;
	}
	if (redis_pid > 0) {
		kill(redis_pid, SIGTERM);
		waitpid(redis_pid, NULL, 0);
		redis_pid = 0;
	}
}

static void stop_all(void)
{
	stop_processes(false);
}

static void on_signal(int sig)
{
	stop_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void start_all(const char *bin)
{
	char rport[16], listen[64], url[96], log[200];
	const char *rargv[] = { "redis-server", "--port", rport, "--bind", "127.0.0.1", "--save", "",
			  "--appendonly", "no", "--dir", dir, NULL };
	const char *dargv[] = { bin, "--listen", listen, "--redis", url, "--log-level", "warn",
			  NULL };

	redis_port = free_port();
	http_port = free_port();
	snprintf(rport, sizeof(rport), "%d", redis_port);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", http_port);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", redis_port);
	snprintf(log, sizeof(log), "%s/redis.log", dir);
	redis_pid = spawn(rargv, log);
	if (!wait_port(redis_port)) {
		fprintf(stderr, "bench: redis-server did not start (%s)\n", log);
		exit(2);
	}
	(void)dargv;
	start_dlockd(bin);
}

/* A fresh dlockd on a new port (the waiter scenarios each get their own,
 * so one's freed-but-kept heap does not count as the next one's baseline). */
static void start_dlockd(const char *bin)
{
	start_dlockd_sync(bin, NULL);
}

/* The same with --redis-sync-replicas replicas (NULL: off). */
static void start_dlockd_sync(const char *bin, const char *replicas)
{
	start_dlockd_url(bin, NULL, replicas);
}

/* The same on --redis url (NULL: the bench's standalone Redis). */
static void start_dlockd_url(const char *bin, const char *redis_url, const char *replicas)
{
	char listen[64], url[300];
	char cert[300], key[300];
	const char *dargv[16] = { bin, "--listen", listen, "--redis", url, "--log-level", "warn" };
	int argc = 7, st = -1;

	stop_dlockd(true);
	dlockd_bin = bin;
	dlockd_since = current;
	http_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", http_port);
	if (redis_url)
		snprintf(url, sizeof(url), "%s", redis_url);
	else
		snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", redis_port);
	snprintf(dlockd_log, sizeof(dlockd_log), "%s/dlockd-%d.log", dir, ++dlockd_serial);
	snprintf(cert, sizeof(cert), "%s/tls.pem", dir);
	snprintf(key, sizeof(key), "%s/tls.key", dir);
	if (replicas) {
		dargv[argc++] = "--redis-sync-replicas";
		dargv[argc++] = replicas;
	}
	if (fair_cap) {	/* as many fair waiters as the scenario names */
		dargv[argc++] = "--max-fair-queue";
		dargv[argc++] = fair_cap;
	}
	if (redis_ca) {	/* TLS to Redis (redis_tls_cost) */
		dargv[argc++] = "--redis-ca";
		dargv[argc++] = redis_ca;
	}
	if (use_tls) {	/* an HTTPS dlockd (tls_cost) */
		dargv[argc++] = "--tls-cert";
		dargv[argc++] = cert;
		dargv[argc++] = "--tls-key";
		dargv[argc++] = key;
	}
	dlockd_pid = spawn(dargv, dlockd_log);
	if (!wait_port(http_port)) {
		fprintf(stderr, "bench: dlockd (%s) did not start\n", bin);
		print_log_tail(dlockd_log, 30);
		stop_all();
		exit(2);
	}
	sleep_ms(300);
	/* a sentinel or cluster URL is resolved after the port opens */
	for (int i = 0; i < 200 && st != 200; i++) {
		struct conn c;

		if (conn_open(&c, http_port) == 0) {
			st = http_req(&c, "GET", "/readyz", NULL);
			conn_close(&c);
		}
		if (st != 200)
			sleep_ms(50);
	}
	if (st != 200)
		fail(current, "dlockd (%s) not ready within 10 s; log %s", bin, dlockd_log);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The lock scenarios, dlockd against the floor (or, with --compare, one
 * dlockd binary against another); name: printf of the client count. */
struct lock_scenario {
	const char *name;
	enum kind kind;
	enum mode mode;
	int clients;		/* as written; --quick: clients_for() */
};

static const struct lock_scenario lock_scenarios[] = {
	{ "uncontended lock, %d clients", K_LOCK, UNCONTENDED, 1 },
	{ "uncontended lock, %d clients", K_LOCK, UNCONTENDED, 16 },
	{ "uncontended lock, %d clients", K_LOCK, UNCONTENDED, 64 },
	{ "hot lock, %d clients", K_LOCK, HOT, 64 },
	{ "uncontended fairlock, %d clients", K_FAIR, UNCONTENDED, 16 },
	{ "hot fairlock, %d clients", K_FAIR, HOT, 64 },
	{ "uncontended rwlock write, %d clients", K_WRITE, UNCONTENDED, 16 },
	{ "hot rwlock write, %d clients", K_WRITE, HOT, 64 },
	{ "uncontended rwlock read, %d clients", K_READ, UNCONTENDED, 16 },
	{ "uncontended semaphore, %d clients", K_SEM, UNCONTENDED, 16 },
	{ "hot semaphore of 4, %d clients", K_SEM, HOT, 64 },
};

/* The median of v[0..n) (sorted in place); of an even n, the mean of the
 * middle two. */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	if (!n)
		return NAN;
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Uncontended throughput is measured in `rounds` alternating runs of
 * dlockd and of the floor, and the medians are compared: a neighbour's
 * burst on the shared machine then costs one round, not the figure. The
 * hot lock runs one round (its latency is per hand-off, thousands a run). */
/* One side's run, with what it cost per cycle: Redis commands (inside
 * scripts included) and the CPU of dlockd and of Redis. */
struct side_run {
	struct outcome o;
	double cmds, evalsha, dlockd_us, redis_us;
};

struct target;
static void target_usage(const struct target *t, long long *cmds, long long *evalsha,
			 double *cpu_us);
static double proc_cpu_us(pid_t pid);

static struct side_run run_side(const struct lock_scenario *ls, enum side side, int clients,
				const char *tag)
{
	struct side_run r = { 0 };
	long long c0, c1, e0, e1;
	double r0, r1, d0, d1, cycles;

	target_usage(NULL, &c0, &e0, &r0);
	d0 = proc_cpu_us(dlockd_pid);
	r.o = run_once(ls->kind, ls->mode, side, clients, tag);
	target_usage(NULL, &c1, &e1, &r1);
	d1 = proc_cpu_us(dlockd_pid);
	cycles = r.o.cycles > 0 ? (double)r.o.cycles : 1;
	r.cmds = (double)(c1 - c0) / cycles;
	r.evalsha = (double)(e1 - e0) / cycles;
	r.dlockd_us = (d1 - d0) / cycles;
	r.redis_us = (r1 - r0) / cycles;
	return r;
}

static int cmp_side_run(const void *a, const void *b)
{
	double x = ((const struct side_run *)a)->o.per_s, y = ((const struct side_run *)b)->o.per_s;

	return x < y ? -1 : x > y;
}

/* The round of median throughput (v sorted in place). */
static struct side_run median_run(struct side_run *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_side_run);
	return v[n / 2];
}

/* Its figures per cycle, against a floor's (NULL: none). */
static void side_figures(const char *scenario, const char *what, const struct side_run *a,
			 const struct side_run *b)
{
	char m[96];

	snprintf(m, sizeof(m), "%s per %s", "cmds incl. scripts'", what);
	result(scenario, m, a->cmds, b ? b->cmds : -1, "");
	snprintf(m, sizeof(m), "scripts per %s", what);
	result(scenario, m, a->evalsha, b ? b->evalsha : -1, "");
	snprintf(m, sizeof(m), "dlockd CPU per %s", what);
	result(scenario, m, a->dlockd_us, -1, "us");
	snprintf(m, sizeof(m), "Redis CPU per %s", what);
	result(scenario, m, a->redis_us, b ? b->redis_us : -1, "us");
}

/* dlockd against its own scripts called directly (the "floor" column:
 * what the HTTP layer costs) and, for the plain lock uncontended, against
 * Redisson's lock scripts (what a lock costs on this Redis at all), in
 * rounds on the same Redis, each side once a round, their order turned
 * every round (no side always runs first, on a Redis the one before it
 * left keys in). Each column is its median; a ratio is the median of the
 * rounds' own ratios, each of runs seconds apart: a neighbour's burst, or
 * the shared machine's speed drifting over the run (on the 2-core bench
 * machine rounds differ by a quarter), lands in one round, not in the
 * result. */
static void versus(const struct lock_scenario *ls)
{
	struct side_run h[MAX_ROUNDS], f[MAX_ROUNDS], g[MAX_ROUNDS], hm, fm, gm;
	double hf[MAX_ROUNDS], hg[MAX_ROUNDS];
	int n = ls->mode == HOT ? 1 : rounds, herr = 0, ferr = 0, gerr = 0;
	int clients = clients_for(ls->clients);
	bool redisson = ls->kind == K_LOCK && ls->mode == UNCONTENDED;
	const char *what = ls->mode == HOT ? "hand-off" : "cycle";
	char scenario[96];

	snprintf(scenario, sizeof(scenario), ls->name, clients);
	if (!scenario_begin(scenario))
		return;
	for (int i = 0; i < n; i++) {
		struct side_run *runs[] = { &h[i], &f[i], &g[i] };
		static const enum side sides[] = { SIDE_DLOCKD, SIDE_SCRIPTS, SIDE_REDISSON };
		static const char *const tags[] = { "h", "f", "g" };
		int nsides = redisson ? 3 : 2;
		bool sound;

		for (int k = 0; k < nsides; k++) {
			int j = (i + k) % nsides;

			*runs[j] = run_side(ls, sides[j], clients, tags[j]);
		}
		hf[i] = h[i].o.per_s / f[i].o.per_s;
		if (redisson)
			hg[i] = h[i].o.per_s / g[i].o.per_s;
		herr += h[i].o.errors;
		ferr += f[i].o.errors;
		if (n > 1)
			fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1,
				h[i].o.per_s, f[i].o.per_s, hf[i]);
		sound = check_outcome(scenario, "dlockd", &h[i].o, ls->mode);
		sound = check_outcome(scenario, "floor", &f[i].o, ls->mode) && sound;
		if (redisson) {
			gerr += g[i].o.errors;
			sound = check_outcome(scenario, "Redisson's scripts", &g[i].o, ls->mode) &&
				sound;
		}
		if (!sound)
			n = i + 1;	/* no more rounds: it failed */
	}
	hm = median_run(h, n);
	fm = median_run(f, n);
	result_ratio(scenario, ls->mode == HOT ? "hand-offs/s" : "cycles/s", hm.o.per_s,
		     fm.o.per_s, median(hf, n), "/s");
	if (redisson) {
		gm = median_run(g, n);
		result_ratio(scenario, "cycles/s vs Redisson's scripts", hm.o.per_s, gm.o.per_s,
			     median(hg, n), "/s");
		result(scenario, "Redisson's cmds incl. scripts' per cycle", gm.cmds, -1, "");
	}
	if (ls->mode == HOT) {
		result(scenario, "hand-off p50", hm.o.p50_ms, fm.o.p50_ms, "ms");
		result(scenario, "hand-off p99", hm.o.p99_ms, fm.o.p99_ms, "ms");
		result(scenario, "hand-off max", hm.o.max_ms, fm.o.max_ms, "ms");
	}
	side_figures(scenario, what, &hm, &fm);
	if (herr || ferr || gerr)
		result(scenario, "errors", herr, ferr + gerr, "");
}

/* Start a replica of the bench's redis and wait until the master lists
 * it online (ROLE); false if it does not come. */
static bool start_replica(void)
{
	char rport[16], master[16], log[200], rdir[200];
	const char *argv[] = { "redis-server", "--port", rport, "--bind", "127.0.0.1", "--save", "",
			       "--appendonly", "no", "--dir", rdir, "--replicaof", "127.0.0.1",
			       master, NULL };
	redisContext *c = redisConnect("127.0.0.1", redis_port);
	bool online = false;

	snprintf(rport, sizeof(rport), "%d", free_port());
	snprintf(master, sizeof(master), "%d", redis_port);
	snprintf(rdir, sizeof(rdir), "%s/replica", dir);
	snprintf(log, sizeof(log), "%s/replica.log", dir);
	mkdir(rdir, 0755);
	replica_pid = spawn(argv, log);
	for (int i = 0; c && !c->err && i < 200 && !online; i++) {
		redisReply *r = redisCommand(c, "ROLE");

		online = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
			 r->element[2]->type == REDIS_REPLY_ARRAY && r->element[2]->elements > 0;
		if (r)
			freeReplyObject(r);
		if (!online)
			sleep_ms(50);
	}
	if (c)
		redisFree(c);
	return online;
}

/* The cost of --redis-sync-replicas 1 (a WAIT after every change) on a
 * master with one replica: uncontended cycles with it ("dlockd") against
 * the same run without it (the "floor" column), in alternating rounds. */
static void sync_cost(const char *bin, int clients)
{
	double with[MAX_ROUNDS], without[MAX_ROUNDS];
	char scenario[96];
	int n = rounds;

	snprintf(scenario, sizeof(scenario), "sync replicas 1 vs off, lock, %d clients", clients);
	if (!scenario_begin(scenario))
		return;
	for (int i = 0; i < n; i++) {
		struct outcome o0, o1;
		bool sound0, sound1;

		start_dlockd_sync(bin, NULL);
		o0 = run_once(K_LOCK, UNCONTENDED, SIDE_DLOCKD, clients, "s0");
		start_dlockd_sync(bin, "1");
		o1 = run_once(K_LOCK, UNCONTENDED, SIDE_DLOCKD, clients, "s1");
		without[i] = o0.per_s;
		with[i] = o1.per_s;
		fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1, with[i],
			without[i], with[i] / without[i]);
		sound0 = check_outcome(scenario, "sync off", &o0, UNCONTENDED);
		sound1 = check_outcome(scenario, "sync 1", &o1, UNCONTENDED);
		if (!sound0 || !sound1)
			n = i + 1;	/* no more rounds: it failed */
	}
	result(scenario, "cycles/s (floor: off)", median(with, n), median(without, n), "/s");
	start_dlockd_sync(bin, NULL);
}

/* dir/tls.pem and dir/tls.key: a self-signed EC P-256 certificate for
 * 127.0.0.1 (made once), which clients trust as its own CA. */
static bool tls_cert_made(void)
{
	static int made;	/* 0 not yet, 1 made, -1 failed */
	char cmd[1024];

	if (!made) {
		snprintf(cmd, sizeof(cmd), "openssl req -x509 -newkey ec -pkeyopt "
			 "ec_paramgen_curve:P-256 -nodes -keyout %s/tls.key -out %s/tls.pem -days 2 "
			 "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null", dir,
			 dir);
		made = system(cmd) == 0 ? 1 : -1;
	}
	return made > 0;
}

/* The cost of TLS to Redis: uncontended cycles against a dlockd on
 * rediss:// ("dlockd") and the same run against one on redis:// (the
 * "floor" column) to the same redis-server, which serves both --port and
 * --tls-port, in alternating rounds, a fresh dlockd each. Redis' TLS
 * (OpenSSL) answers both; dlockd's side of TLS runs in its loops' own
 * I/O (service/redis/redis_tls_io.c). Each round's line on stderr has the
 * CPU time per cycle of dlockd and of Redis, which a busy machine does
 * not skew as it does the rates. */
static void redis_tls_cost(const char *bin, int clients)
{
	double with[MAX_ROUNDS], without[MAX_ROUNDS];
	char scenario[96], ca[300], key[300], rport[16], tport[16], log[200], rdir[200];
	char plain[96], tls[96];
	const char *argv[] = { "redis-server", "--port", rport, "--tls-port", tport,
			       "--tls-cert-file", ca, "--tls-key-file", key, "--tls-ca-cert-file",
			       ca, "--tls-auth-clients", "no", "--bind", "127.0.0.1", "--save", "",
			       "--appendonly", "no", "--dir", rdir, NULL };
	int port, tls_port, n = rounds;

	snprintf(scenario, sizeof(scenario), "redis tls vs plain, lock, %d clients", clients);
	if (!scenario_begin(scenario))
		return;
	if (!tls_cert_made()) {
		fail(scenario, "openssl could not make a certificate");
		return;
	}
	snprintf(ca, sizeof(ca), "%s/tls.pem", dir);
	snprintf(key, sizeof(key), "%s/tls.key", dir);
	port = free_port();
	tls_port = free_port();
	snprintf(rport, sizeof(rport), "%d", port);
	snprintf(tport, sizeof(tport), "%d", tls_port);
	snprintf(rdir, sizeof(rdir), "%s/redis-tls", dir);
	snprintf(log, sizeof(log), "%s/redis-tls.log", dir);
	mkdir(rdir, 0755);
	redis_tls_pid = spawn(argv, log);
	if (!wait_port(port) || !wait_port(tls_port)) {
		fail(scenario, "redis-server with TLS did not start (%s)", log);
		goto out;
	}
	snprintf(plain, sizeof(plain), "redis://127.0.0.1:%d/0", port);
	snprintf(tls, sizeof(tls), "rediss://127.0.0.1:%d/0", tls_port);
	for (int i = 0; i < n; i++) {
		struct outcome o[2];
		double d_us[2], r_us[2];
		bool sound0, sound1;

		for (int k = 0; k < 2; k++) {	/* k 0: redis://, 1: rediss:// */
			double d0, r0;

			redis_ca = k ? ca : NULL;
			start_dlockd_url(bin, k ? tls : plain, NULL);
			redis_ca = NULL;
			d0 = proc_cpu_us(dlockd_pid);
			r0 = proc_cpu_us(redis_tls_pid);
			o[k] = run_once(K_LOCK, UNCONTENDED, SIDE_DLOCKD, clients, k ? "r1" : "r0");
			d_us[k] = (proc_cpu_us(dlockd_pid) - d0) / (o[k].cycles > 0 ? o[k].cycles : 1);
			r_us[k] = (proc_cpu_us(redis_tls_pid) - r0) / (o[k].cycles > 0 ? o[k].cycles : 1);
		}
		without[i] = o[0].per_s;
		with[i] = o[1].per_s;
		fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f); CPU per cycle: dlockd %.0f vs "
			"%.0f us, redis %.0f vs %.0f us\n", scenario, i + 1, with[i], without[i],
			with[i] / without[i], d_us[1], d_us[0], r_us[1], r_us[0]);
		sound0 = check_outcome(scenario, "redis://", &o[0], UNCONTENDED);
		sound1 = check_outcome(scenario, "rediss://", &o[1], UNCONTENDED);
		if (!sound0 || !sound1)
			n = i + 1;	/* no more rounds: it failed */
	}
	result(scenario, "cycles/s (floor: redis://)", median(with, n), median(without, n), "/s");
out:
	start_dlockd(bin);
	kill(redis_tls_pid, SIGTERM);
	waitpid(redis_tls_pid, NULL, 0);
	redis_tls_pid = 0;
}

/* The cost of HTTPS: uncontended cycles on keep-alive connections against
 * a dlockd serving HTTPS ("dlockd") and the same run against a plaintext
 * one (the "floor" column), in alternating rounds, a fresh dlockd each.
 * The certificate is a self-signed EC P-256 one made with openssl, which
 * the client checks; TLS 1.3 as GnuTLS negotiates it by default. */
static void tls_cost(const char *bin, int clients)
{
	double with[MAX_ROUNDS], without[MAX_ROUNDS];
	char scenario[96], cmd[1024];
	int n = rounds;

	snprintf(scenario, sizeof(scenario), "https vs http, lock, %d clients", clients);
	if (!scenario_begin(scenario))
		return;
	if (!tls_trust) {
		if (!tls_cert_made()) {
			fail(scenario, "openssl could not make a certificate");
			return;
		}
		snprintf(cmd, sizeof(cmd), "%s/tls.pem", dir);
		gnutls_certificate_allocate_credentials(&tls_trust);
		if (gnutls_certificate_set_x509_trust_file(tls_trust, cmd, GNUTLS_X509_FMT_PEM) != 1) {
			fail(scenario, "cannot trust %s", cmd);
			gnutls_certificate_free_credentials(tls_trust);
			tls_trust = NULL;
			return;
		}
	}
	for (int i = 0; i < n; i++) {
		struct outcome o0, o1;
		bool sound0, sound1;

		use_tls = false;
		start_dlockd(bin);
		o0 = run_once(K_LOCK, UNCONTENDED, SIDE_DLOCKD, clients, "t0");
		use_tls = true;
		start_dlockd(bin);
		o1 = run_once(K_LOCK, UNCONTENDED, SIDE_DLOCKD, clients, "t1");
		without[i] = o0.per_s;
		with[i] = o1.per_s;
		fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1, with[i],
			without[i], with[i] / without[i]);
		sound0 = check_outcome(scenario, "http", &o0, UNCONTENDED);
		sound1 = check_outcome(scenario, "https", &o1, UNCONTENDED);
		if (!sound0 || !sound1)
			n = i + 1;	/* no more rounds: it failed */
	}
	use_tls = false;
	result(scenario, "cycles/s (floor: http)", median(with, n), median(without, n), "/s");
	start_dlockd(bin);
}

/* ----- Sentinel and Cluster topologies against the standalone Redis -----
 *
 * A bench-local copy of what tests/harness (cluster.c, sentinel.c) does:
 * the bench does not link the test harness (libcurl, the test runner). */

/* A redis-server on a free loopback port (cluster: its bus port, +10000,
 * free too) in a directory of its own, with extra arguments; its pid is
 * kept for stop_all. Returns the port, or -1. */
static int topo_redis(const char *what, const char *const extra[])
{
	char rport[16], rdir[200], log[200];
	const char *argv[32] = { "redis-server", "--port", rport, "--bind", "127.0.0.1", "--save",
				 "", "--appendonly", "no", "--dir", rdir };
	int n = 11, port = -1;

	for (int i = 0; i < 1000 && port < 0; i++) {
		int p = free_port(), fd;
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(p + 10000)) };

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (p <= 55535 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			port = p;
		close(fd);
	}
	for (int i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	snprintf(rport, sizeof(rport), "%d", port);
	snprintf(rdir, sizeof(rdir), "%s/%s-%d", dir, what, port);
	snprintf(log, sizeof(log), "%s/%s-%d.log", dir, what, port);
	mkdir(rdir, 0755);
	if (port < 0 || ntopo >= (int)(sizeof(topo_pids) / sizeof(topo_pids[0])))
		return -1;
	topo_pids[ntopo++] = spawn(argv, log);
	return wait_port(port) ? port : -1;
}

/* The reply of a command on 127.0.0.1:port, on a connection of its own
 * (free it), or NULL. */
static redisReply *cmd_at(int port, const char *fmt, ...)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	redisReply *r = NULL;
	va_list ap;

	if (c && !c->err) {
		va_start(ap, fmt);
		r = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (c)
		redisFree(c);
	return r;
}

/* Wait (at most 30 s) until the answer of cmd arg ("INFO replication",
 * "CLUSTER INFO") at port contains needle. */
static bool wait_info(int port, const char *cmd, const char *arg, const char *needle)
{
	for (int i = 0; i < 600; i++) {
		redisReply *r = cmd_at(port, "%s %s", cmd, arg);
		bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, needle);

		if (r)
			freeReplyObject(r);
		if (ok)
			return true;
		sleep_ms(50);
	}
	fprintf(stderr, "bench: %d never said %s\n", port, needle);
	return false;
}

/* A topology dlockd is pointed at: its --redis URL and its data masters
 * (where commands are counted). */
struct target {
	const char *label;
	char url[300];
	int masters[3];
	int nmasters;
	int redis_pids_from, redis_pids_to;	/* its data nodes in topo_pids */
};

/* 1 master + 1 replica + 1 sentinel (quorum 1). */
static bool sentinel_topology(struct target *t)
{
	char mport[16];
	const char *rep[] = { "--replicaof", "127.0.0.1", mport, NULL };
	const char *sen[] = { "--sentinel", NULL };
	char conf[300];
	int m, r, s;
	FILE *f;

	memset(t, 0, sizeof(*t));
	t->label = "sentinel";
	t->redis_pids_from = ntopo;
	if ((m = topo_redis("sent-master", NULL)) < 0)
		return false;
	snprintf(mport, sizeof(mport), "%d", m);
	if ((r = topo_redis("sent-replica", rep)) < 0 ||
	    !wait_info(r, "INFO", "replication", "master_link_status:up"))
		return false;
	t->redis_pids_to = ntopo;
	/* a sentinel reads and rewrites its own config file */
	snprintf(conf, sizeof(conf), "%s/sentinel-%d.conf", dir, m);
	f = fopen(conf, "w");
	if (!f)
		return false;
	fprintf(f, "sentinel monitor m 127.0.0.1 %d 1\n"
		   "sentinel down-after-milliseconds m 5000\n", m);
	fclose(f);
	{
		/* redis-server CONF --sentinel --port P ... */
		char sport[16], sdir[200], log[200];
		const char *argv[] = { "redis-server", conf, "--sentinel", "--port", sport, "--bind",
				       "127.0.0.1", "--dir", sdir, NULL };

		s = free_port();
		snprintf(sport, sizeof(sport), "%d", s);
		snprintf(sdir, sizeof(sdir), "%s/sentinel-%d", dir, s);
		snprintf(log, sizeof(log), "%s/sentinel-%d.log", dir, s);
		mkdir(sdir, 0755);
		topo_pids[ntopo++] = spawn(argv, log);
		if (!wait_port(s))
			return false;
		(void)sen;
	}
	for (int i = 0; i < 600; i++) {
		redisReply *q = cmd_at(s, "SENTINEL REPLICAS m");
		bool ok = q && q->type == REDIS_REPLY_ARRAY && q->elements == 1;

		if (q)
			freeReplyObject(q);
		if (ok)
			break;
		sleep_ms(50);
	}
	snprintf(t->url, sizeof(t->url), "redis-sentinel://127.0.0.1:%d/0#m", s);
	t->masters[0] = m;
	t->nmasters = 1;
	return true;
}

/* 3 masters, no replicas, joined by redis-cli --cluster create. */
static bool cluster_topology(struct target *t)
{
	const char *ext[] = { "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			      "--cluster-node-timeout", "2000", NULL };
	char cmd[600];
	int len;

	memset(t, 0, sizeof(*t));
	t->label = "cluster";
	t->redis_pids_from = ntopo;
	for (int i = 0; i < 3; i++)
		if ((t->masters[i] = topo_redis("cluster", ext)) < 0)
			return false;
	t->nmasters = 3;
	t->redis_pids_to = ntopo;
	len = snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
	for (int i = 0; i < 3; i++)
		len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, " 127.0.0.1:%d", t->masters[i]);
	snprintf(cmd + len, sizeof(cmd) - (size_t)len,
		 " --cluster-replicas 0 --cluster-yes > %s/cluster-create.log 2>&1", dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "bench: %s failed (%s/cluster-create.log)\n", cmd, dir);
		return false;
	}
	for (int i = 0; i < 3; i++)
		if (!wait_info(t->masters[i], "CLUSTER", "INFO", "cluster_state:ok"))
			return false;
	snprintf(t->url, sizeof(t->url), "redis://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
		 t->masters[0], t->masters[1], t->masters[2]);
	return true;
}

/* CPU time (user + system) of pid so far, in microseconds. */
static double proc_cpu_us(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	/* after "(comm)": state is field 3, utime 14, stime 15 */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* Commands (INFO commandstats, inside scripts included, INFO excluded)
 * and CPU time of the target's data nodes; t NULL: the standalone Redis. */
static void target_usage(const struct target *t, long long *cmds, long long *evalsha,
			 double *cpu_us)
{
	long long total, eval;

	*cmds = *evalsha = 0;
	*cpu_us = 0;
	if (!t) {
		redisContext *c = redis_connect();

		redis_calls(c, &total, &eval);
		redisFree(c);
		*cmds = total;
		*evalsha = eval;
		*cpu_us = proc_cpu_us(redis_pid);
		return;
	}
	for (int i = 0; i < t->nmasters; i++) {
		redisContext *c = redisConnect("127.0.0.1", t->masters[i]);

		if (c && !c->err) {
			redis_calls(c, &total, &eval);
			*cmds += total;
			*evalsha += eval;
		}
		if (c)
			redisFree(c);
	}
	for (int i = t->redis_pids_from; i < t->redis_pids_to; i++)
		*cpu_us += proc_cpu_us(topo_pids[i]);
}

/* One run of the plain lock on dlockd over t (NULL: standalone) with
 * --redis-sync-replicas sync (NULL: off), on a fresh dlockd. */
struct measured {
	struct outcome o;
	double cmds_per_cycle;		/* Redis commands, summed over the masters */
	double evalsha_per_cycle;	/* of which script calls (the rest: inside them) */
	double dlockd_us, redis_us;	/* CPU per cycle */
};

static struct measured measure(const struct target *t, const char *sync, enum mode m,
			       int clients)
{
	struct measured r = { 0 };
	long long c0, c1, e0, e1;
	double r0, r1, d0, d1, cycles;

	start_dlockd_url(bench_bin, t ? t->url : NULL, sync);
	target_usage(t, &c0, &e0, &r0);
	d0 = proc_cpu_us(dlockd_pid);
	r.o = run_once(K_LOCK, m, SIDE_DLOCKD, clients, t ? t->label : "standalone");
	target_usage(t, &c1, &e1, &r1);
	d1 = proc_cpu_us(dlockd_pid);
	cycles = (double)r.o.cycles;
	if (cycles < 1)
		cycles = 1;
	r.cmds_per_cycle = (double)(c1 - c0) / cycles;
	r.evalsha_per_cycle = (double)(e1 - e0) / cycles;
	r.dlockd_us = (d1 - d0) / cycles;
	r.redis_us = (r1 - r0) / cycles;
	return r;
}

static int cmp_measured(const void *a, const void *b)
{
	double x = ((const struct measured *)a)->o.per_s, y = ((const struct measured *)b)->o.per_s;

	return x < y ? -1 : x > y;
}

/* A side of a topology scenario, for failures: "sentinel, sync replicas 1". */
static void side_name(char *buf, size_t len, const struct target *t, const char *sync)
{
	snprintf(buf, len, "%s%s", t ? t->label : "standalone", sync ? ", sync replicas 1" : "");
}

/* a against b (NULL: standalone), with their sync settings, at clients:
 * `rounds` alternating rounds (the hot lock: one), the medians in the
 * "dlockd" (a) and "floor" (b) columns. */
static void topo_versus(const char *scenario, const struct target *a, const char *sync_a,
			const struct target *b, const char *sync_b, enum mode m, int clients)
{
	struct measured ma[MAX_ROUNDS], mb[MAX_ROUNDS];
	int n = m == HOT ? 1 : rounds;
	char side_a[64], side_b[64];

	side_name(side_a, sizeof(side_a), a, sync_a);
	side_name(side_b, sizeof(side_b), b, sync_b);
	for (int i = 0; i < n; i++) {
		bool sound_a, sound_b;

		mb[i] = measure(b, sync_b, m, clients);
		ma[i] = measure(a, sync_a, m, clients);
		if (n > 1)
			fprintf(stderr, "  %s round %d: %.0f vs %.0f /s (%.2f)\n", scenario, i + 1,
				ma[i].o.per_s, mb[i].o.per_s, ma[i].o.per_s / mb[i].o.per_s);
		sound_a = check_outcome(scenario, side_a, &ma[i].o, m);
		sound_b = check_outcome(scenario, side_b, &mb[i].o, m);
		if (!sound_a || !sound_b)
			n = i + 1;	/* no more rounds: it failed */
	}
	qsort(ma, (size_t)n, sizeof(*ma), cmp_measured);
	qsort(mb, (size_t)n, sizeof(*mb), cmp_measured);
	ma[0] = ma[n / 2];
	mb[0] = mb[n / 2];
	result(scenario, m == HOT ? "hand-offs/s" : "cycles/s", ma[0].o.per_s, mb[0].o.per_s, "/s");
	if (m == HOT) {
		result(scenario, "hand-off p50", ma[0].o.p50_ms, mb[0].o.p50_ms, "ms");
		result(scenario, "hand-off p99", ma[0].o.p99_ms, mb[0].o.p99_ms, "ms");
	}
	/* per cycle = per hand-off on the hot lock: each cycle's release
	 * hands it to the next */
	result(scenario, m == HOT ? "scripts per hand-off" : "scripts per cycle",
	       ma[0].evalsha_per_cycle, mb[0].evalsha_per_cycle, "");
	result(scenario, m == HOT ? "cmds per hand-off incl. scripts'" : "cmds per cycle incl. scripts'",
	       ma[0].cmds_per_cycle, mb[0].cmds_per_cycle, "");
	result(scenario, m == HOT ? "dlockd CPU per hand-off" : "dlockd CPU per cycle",
	       ma[0].dlockd_us, mb[0].dlockd_us, "us");
	result(scenario, m == HOT ? "Redis CPU per hand-off" : "Redis CPU per cycle",
	       ma[0].redis_us, mb[0].redis_us, "us");
	if (ma[0].o.errors || mb[0].o.errors)
		result(scenario, "errors", ma[0].o.errors, mb[0].o.errors, "");
}

/* A topology's scenarios (rows "<label> vs standalone, ..."): against the
 * standalone Redis uncontended at 1 and 16 clients and the hot lock at
 * 64; on the sentinel topology also --redis-sync-replicas 1 against off. */
static const struct topo_scenario {
	const char *name;	/* printf: the label, the clients */
	enum mode mode;
	int clients;		/* as written; --quick: clients_for() */
	bool sync;		/* sync 1 against off on the topology itself */
} topo_scenarios[] = {
	{ "%s vs standalone, lock, %d clients", UNCONTENDED, 1, false },
	{ "%s vs standalone, lock, %d clients", UNCONTENDED, 16, false },
	{ "%s vs standalone, hot lock, %d clients", HOT, 64, false },
	{ "%s, sync replicas 1 vs off, lock, %d clients", UNCONTENDED, 1, true },
	{ "%s, sync replicas 1 vs off, lock, %d clients", UNCONTENDED, 16, true },
};

static void topo_scenario_name(char *buf, size_t len, const struct topo_scenario *ts,
			       const char *label)
{
	snprintf(buf, len, ts->name, label, clients_for(ts->clients));
}

/* Stop the topology's processes (started last), keeping the standalone
 * Redis and its replica. */
static void topology_stop(void)
{
	stop_dlockd(true);
	for (int i = 0; i < ntopo; i++) {
		kill(topo_pids[i], SIGTERM);
		waitpid(topo_pids[i], NULL, 0);
		topo_pids[i] = 0;
	}
	ntopo = 0;
}

/* Start the topology (start), run its first n topo_scenarios that --only
 * wants, stop it; nothing is started when none is wanted. */
static void topology_bench(const char *label, bool (*start)(struct target *), size_t n)
{
	struct target t;
	bool any = false;
	char s[96];

	for (size_t i = 0; i < n; i++) {
		topo_scenario_name(s, sizeof(s), &topo_scenarios[i], label);
		any = any || wanted(s);
	}
	if (!any)
		return;
	if (!start(&t)) {
		fail(label, "the %s topology did not start (logs in %s)", label, dir);
		topology_stop();
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct topo_scenario *ts = &topo_scenarios[i];

		topo_scenario_name(s, sizeof(s), ts, label);
		if (!scenario_begin(s))
			continue;
		if (ts->sync)
			topo_versus(s, &t, "1", &t, NULL, ts->mode, clients_for(ts->clients));
		else
			topo_versus(s, &t, NULL, NULL, NULL, ts->mode, clients_for(ts->clients));
	}
	topology_stop();
}

/* ----- --compare OLD NEW: two dlockd binaries, paired ----- */

/* A lock scenario on two binaries: `rounds` rounds, each running both on
 * a fresh dlockd over the same Redis, the old one first in odd rounds and
 * the new one first in even ones (a drift of the machine during a round
 * then favours neither). Each round's ratio new/old goes to stderr, their
 * median to the table: a ratio of paired runs, not of medians. */
static void compare_scenario(const struct lock_scenario *ls, const char *old_bin,
			     const char *new_bin)
{
	double olds[MAX_ROUNDS], news[MAX_ROUNDS], ratio[MAX_ROUNDS];
	double p50[2][MAX_ROUNDS], p99[2][MAX_ROUNDS], p50r[MAX_ROUNDS], p99r[MAX_ROUNDS];
	int n = rounds, clients = clients_for(ls->clients);
	char scenario[96];

	snprintf(scenario, sizeof(scenario), ls->name, clients);
	if (!scenario_begin(scenario))
		return;
	for (int i = 0; i < n; i++) {
		struct outcome o[2];	/* [0] old, [1] new */
		bool new_first = i % 2, sound_old, sound_new;

		for (int j = 0; j < 2; j++) {
			int which = (j == 0) == new_first;	/* 1: new */

			start_dlockd(which ? new_bin : old_bin);
			o[which] = run_once(ls->kind, ls->mode, SIDE_DLOCKD, clients, which ? "new" : "old");
		}
		olds[i] = o[0].per_s;
		news[i] = o[1].per_s;
		ratio[i] = o[1].per_s / o[0].per_s;
		fprintf(stderr, "  %s round %d (%s first): old %.0f /s, new %.0f /s, new/old %.2f",
			scenario, i + 1, new_first ? "new" : "old", olds[i], news[i], ratio[i]);
		if (ls->mode == HOT) {
			for (int w = 0; w < 2; w++) {
				p50[w][i] = o[w].p50_ms;
				p99[w][i] = o[w].p99_ms;
			}
			p50r[i] = o[1].p50_ms / o[0].p50_ms;
			p99r[i] = o[1].p99_ms / o[0].p99_ms;
			fprintf(stderr, "; hand-off p50 %.2f / %.2f ms, p99 %.2f / %.2f ms",
				o[0].p50_ms, o[1].p50_ms, o[0].p99_ms, o[1].p99_ms);
		}
		fputc('\n', stderr);
		sound_old = check_outcome(scenario, "old", &o[0], ls->mode);
		sound_new = check_outcome(scenario, "new", &o[1], ls->mode);
		if (!sound_old || !sound_new)
			n = i + 1;	/* no more rounds: it failed */
	}
	result_ratio(scenario, ls->mode == HOT ? "hand-offs/s" : "cycles/s", median(news, n),
		     median(olds, n), median(ratio, n), "/s");
	if (ls->mode == HOT) {
		result_ratio(scenario, "hand-off p50", median(p50[1], n), median(p50[0], n),
			     median(p50r, n), "ms");
		result_ratio(scenario, "hand-off p99", median(p99[1], n), median(p99[0], n),
			     median(p99r, n), "ms");
	}
}

/* ----- The report: the table, the JSON, the verdict ----- */

static void print_table(void)
{
	bool cmp = !strcmp(col_a, "new");

	printf("\n| scenario | figure | %s | %s | %s |\n|---|---|---:|---:|---:|\n",
	       cmp ? "new" : "dlockd", cmp ? "old" : "Redis floor",
	       cmp ? "new/old (median of rounds)" : "ratio");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		printf("| %s | %s | %.2f %s |", r->scenario, r->metric, r->a, r->unit);
		if (isfinite(r->b))
			printf(" %.2f %s |", r->b, r->unit);
		else
			printf(" |");
		if (isfinite(r->ratio))
			printf(" %.2f |\n", r->ratio);
		else
			printf(" |\n");
	}
	printf("\n%ld cores, %.1f s per run, %d round(s)%s\n", sysconf(_SC_NPROCESSORS_ONLN), seconds,
	       rounds, quick ? ", --quick" : "");
	fflush(stdout);	/* before the verdict on stderr */
}

/* ----- Targets: what dlockd should reach, judged on this run's figures ----- */

/* A target: a figure of a scenario (its dlockd column, or with RATIO its
 * ratio to the floor column), at most (AT_MOST) or at least the bound;
 * with OF_ROW, the figure divided by another row's dlockd column (the
 * same metric of scenario `of`). Missed targets are listed; they do not
 * fail the bench (a floor or a side that fails does). */
enum target_how { AT_LEAST, AT_MOST };
enum target_col { COL_DLOCKD, COL_RATIO, OF_ROW };

static const struct bench_target {
	const char *scenario, *metric;
	enum target_col col;
	enum target_how how;
	double bound;
	const char *of;		/* OF_ROW: the other scenario */
} bench_targets[] = {
	{ "uncontended lock, 16 clients", "cycles/s vs Redisson's scripts", COL_RATIO, AT_LEAST, 0.8 , NULL },
	{ "uncontended lock, 1 clients", "cycles/s vs Redisson's scripts", COL_RATIO, AT_LEAST, 0.7 , NULL },
	{ "uncontended fairlock, 16 clients", "cycles/s", OF_ROW, AT_LEAST, 0.8,
	  "uncontended lock, 16 clients" },
	{ "uncontended rwlock write, 16 clients", "cycles/s", OF_ROW, AT_LEAST, 0.8,
	  "uncontended lock, 16 clients" },
	{ "uncontended rwlock read, 16 clients", "cycles/s", OF_ROW, AT_LEAST, 0.8,
	  "uncontended lock, 16 clients" },
	{ "uncontended lock, 16 clients", "cmds incl. scripts' per cycle", COL_DLOCKD, AT_MOST, 10 , NULL },
	{ "uncontended fairlock, 16 clients", "cmds incl. scripts' per cycle", COL_DLOCKD, AT_MOST,
	  14 , NULL },
	{ "uncontended rwlock write, 16 clients", "cmds incl. scripts' per cycle", COL_DLOCKD,
	  AT_MOST, 14 , NULL },
	{ "uncontended rwlock read, 16 clients", "cmds incl. scripts' per cycle", COL_DLOCKD,
	  AT_MOST, 14 , NULL },
	{ "hot lock, 64 clients", "cmds incl. scripts' per hand-off", COL_DLOCKD, AT_MOST, 14 , NULL },
	{ "uncontended lock, 16 clients", "dlockd CPU per cycle", COL_DLOCKD, AT_MOST, 40 , NULL },
	{ "10000 waiters on 1 lock", "dlockd RSS waiting", COL_DLOCKD, AT_MOST, 40 , NULL },
	{ "10000 waiters on 1 lock", "time to drain", COL_DLOCKD, AT_MOST, 5 , NULL },
	{ "10000 fair waiters on 1 lock", "dlockd RSS waiting", COL_DLOCKD, AT_MOST, 40 , NULL },
	{ "10000 fair waiters on 1 lock", "time to drain", COL_DLOCKD, AT_MOST, 5 , NULL },
	{ "5000 watchers on 1 lock", "release to answer p99", COL_DLOCKD, AT_MOST, 50 , NULL },
	{ "https vs http, lock, 16 clients", "cycles/s (floor: http)", COL_RATIO, AT_LEAST, 0.85 , NULL },
	{ "redis tls vs plain, lock, 1 clients", "cycles/s (floor: redis://)", COL_RATIO, AT_LEAST,
	  0.85 , NULL },
	{ "redis tls vs plain, lock, 16 clients", "cycles/s (floor: redis://)", COL_RATIO, AT_LEAST,
	  0.85 , NULL },
	{ "hot lock, 64 clients", "hand-off p50", COL_DLOCKD, AT_MOST, 0.5 , NULL },
	{ "hot lock, 64 clients", "hand-off p99", COL_DLOCKD, AT_MOST, 1 , NULL },
	{ "hot lock, 64 clients", "hand-off max", COL_DLOCKD, AT_MOST, 5 , NULL },
	/* issue 30: one heartbeat for 100 holdings takes at most half the
	 * time of 100 renews, in a tenth of their round trips to Redis (a
	 * gate, below: a count, steady under load); the commands inside the
	 * scripts are each holding's own renewal, as many as 100 renews run
	 * (reported, not judged) */
	{ "session heartbeat, 100 holdings", "heartbeat p50 vs 100 renews", COL_RATIO, AT_MOST,
	  0.5, NULL },
	{ "session heartbeat, 100 holdings", "scripts per heartbeat", COL_RATIO, AT_MOST, 0.1,
	  NULL },
};

/* The targets (by scenario and figure) whose miss fails the bench. */
static const char *const target_gates[][2] = {
	{ "session heartbeat, 100 holdings", "scripts per heartbeat" },
};

static bool target_gates_bench(const struct bench_target *t)
{
	for (size_t i = 0; i < sizeof(target_gates) / sizeof(target_gates[0]); i++)
		if (!strcmp(t->scenario, target_gates[i][0]) && !strcmp(t->metric, target_gates[i][1]))
			return true;
	return false;
}

static const struct row *find_row(const char *scenario, const char *metric)
{
	for (size_t i = 0; i < nrows; i++)
		if (!strcmp(rows[i].scenario, scenario) && !strcmp(rows[i].metric, metric))
			return &rows[i];
	return NULL;
}

/* t's figure in this run (false: not measured, or not judged: --quick
 * and --compare measure other things), and whether it meets t. */
static bool target_judged(const struct bench_target *t, double *v, bool *met)
{
	const struct row *r = find_row(t->scenario, t->metric), *o = NULL;

	if (quick || !strcmp(col_a, "new") || !r)
		return false;
	if (t->col == OF_ROW && !(o = find_row(t->of, t->metric)))
		return false;
	*v = t->col == COL_DLOCKD ? r->a : t->col == COL_RATIO ? r->ratio : r->a / o->a;
	*met = t->how == AT_MOST ? *v <= t->bound : *v >= t->bound;
	return isfinite(*v);
}

#define NTARGETS (sizeof(bench_targets) / sizeof(bench_targets[0]))

/* The targets whose figures this run measured, met or missed. */
static void print_targets(void)
{
	int judged = 0, missed = 0;

	for (size_t i = 0; i < NTARGETS; i++) {
		const struct bench_target *t = &bench_targets[i];
		double v;
		bool met;

		if (!target_judged(t, &v, &met))
			continue;
		if (!judged++)
			printf("\n| target | figure | measured | bound | |\n|---|---|---:|---:|---|\n");
		missed += !met;
		printf("| %s | %s%s%s%s | %.2f | %s %.2f | %s |\n", t->scenario, t->metric,
		       t->col == COL_RATIO ? " (ratio)" : "", t->col == OF_ROW ? " / " : "",
		       t->col == OF_ROW ? t->of : "", v, t->how == AT_MOST ? "<=" : ">=", t->bound,
		       met ? "met" : target_gates_bench(t) ? "MISSED (fails the bench)" : "MISSED");
		if (!met && target_gates_bench(t))
			fail(t->scenario, "target missed: %s %.2f, bound %s %.2f", t->metric, v,
			     t->how == AT_MOST ? "<=" : ">=", t->bound);
	}
	if (judged)
		printf("\ntargets: %d judged, %d met, %d missed\n", judged, judged - missed, missed);
	fflush(stdout);
}

/* The same as JSON: [{scenario, figure, of, measured, at_most|at_least, met}]. */
static json_t *targets_json(void)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < NTARGETS; i++) {
		const struct bench_target *t = &bench_targets[i];
		double v;
		bool met;
		json_t *o;

		if (!target_judged(t, &v, &met))
			continue;
		o = json_pack("{s:s, s:s, s:s?, s:s, s:f, s:f, s:b}", "scenario", t->scenario,
			      "figure", t->metric, "of", t->of, "column",
			      t->col == COL_RATIO ? "ratio" : "dlockd", "measured", v,
			      t->how == AT_MOST ? "at_most" : "at_least", t->bound, "met", met);
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* Failures the scenarios could not see themselves: a scenario that
 * reported no figure, a figure that is not a number. */
static void check_rows(void)
{
	for (size_t s = 0; s < scenarios.n; s++) {
		bool any = false;

		for (size_t i = 0; i < nrows && !any; i++)
			any = !strcmp(rows[i].scenario, scenarios.v[s]);
		if (!any)
			fail(scenarios.v[s], "reported no figures");
	}
	for (size_t i = 0; i < nrows; i++)
		if (!isfinite(rows[i].a))
			fail(rows[i].scenario, "%s: %s is not a number", rows[i].metric, col_a);
}

static json_t *json_num(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *json_strs(const struct strs *l)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < l->n; i++)
		if (json_array_append_new(a, json_string(l->v[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* The run as JSON (see bench/README.md), or NULL (said on stderr). */
static json_t *results_json(const char *bin, const char *old_bin)
{
	json_t *results = json_array(), *root;

	for (size_t i = 0; results && i < nrows; i++) {
		const struct row *r = &rows[i];
		json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:s}", "scenario", r->scenario,
				      "figure", r->metric, col_a, json_num(r->a), col_b,
				      json_num(r->b), "ratio", json_num(r->ratio), "unit", r->unit);

		if (!o || json_array_append_new(results, o)) {
			fprintf(stderr, "bench: cannot make JSON of %s / %s\n", r->scenario, r->metric);
			json_decref(results);
			return NULL;
		}
	}
	root = json_pack("{s:{s:I}, s:f, s:i, s:b, s:s?, s:s, s:o, s:o, s:o, s:o}", "machine",
			 "cores", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "seconds_per_run",
			 seconds, "rounds", rounds, "quick", quick, "only", only,
			 old_bin ? "new" : "dlockd", bin, "scenarios", json_strs(&scenarios),
			 "failures", json_strs(&failures), "results", results, "targets",
			 targets_json());
	if (root && old_bin && json_object_set_new(root, "old", json_string(old_bin))) {
		json_decref(root);
		root = NULL;
	}
	if (!root)
		fprintf(stderr, "bench: cannot make the JSON document\n");
	return root;
}

/* Is v in the file what x is (NAN: null)? */
static bool json_same(const json_t *v, double x)
{
	return isfinite(x) ? json_is_number(v) && json_number_value(v) == x : json_is_null(v);
}

/* Is v the string s? */
static bool json_str_is(const json_t *v, const char *s)
{
	return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* Read path back and check it holds this run: every row's figures in
 * order, every scenario begun with at least one, the failures. */
static bool json_verified(const char *path)
{
	json_error_t err;
	json_t *root = json_load_file(path, 0, &err), *results, *names;
	bool ok = false;
	size_t i;

	if (!root) {
		fprintf(stderr, "bench: %s is not valid JSON: %s (line %d)\n", path, err.text,
			err.line);
		return false;
	}
	results = json_object_get(root, "results");
	names = json_object_get(root, "scenarios");
	if (!json_is_array(results) || json_array_size(results) != nrows) {
		fprintf(stderr, "bench: %s: \"results\" does not hold the %zu figures\n", path, nrows);
		goto out;
	}
	for (i = 0; i < nrows; i++) {
		const json_t *o = json_array_get(results, i);
		const struct row *r = &rows[i];

		if (!json_is_object(o) || !json_str_is(json_object_get(o, "scenario"), r->scenario) ||
		    !json_str_is(json_object_get(o, "figure"), r->metric) ||
		    !json_str_is(json_object_get(o, "unit"), r->unit) ||
		    !json_same(json_object_get(o, col_a), r->a) ||
		    !json_same(json_object_get(o, col_b), r->b) ||
		    !json_same(json_object_get(o, "ratio"), r->ratio)) {
			fprintf(stderr, "bench: %s: result %zu is not %s / %s as measured\n", path, i,
				r->scenario, r->metric);
			goto out;
		}
	}
	if (!json_is_array(names) || json_array_size(names) != scenarios.n) {
		fprintf(stderr, "bench: %s: \"scenarios\" does not list the %zu run\n", path,
			scenarios.n);
		goto out;
	}
	for (i = 0; i < scenarios.n; i++) {
		const char *name = json_string_value(json_array_get(names, i));
		bool figures = false;

		for (size_t k = 0; name && k < json_array_size(results) && !figures; k++)
			figures = json_str_is(json_object_get(json_array_get(results, k), "scenario"),
					      name);
		if (!name || strcmp(name, scenarios.v[i]) || !figures) {
			fprintf(stderr, "bench: %s: scenario %s has no figures\n", path,
				scenarios.v[i]);
			goto out;
		}
	}
	if (json_array_size(json_object_get(root, "failures")) != failures.n) {
		fprintf(stderr, "bench: %s: \"failures\" is not this run's\n", path);
		goto out;
	}
	ok = true;
out:
	json_decref(root);
	return ok;
}

/* Write the JSON to path and read it back; false if either failed. */
static bool write_json(const char *path, const char *bin, const char *old_bin)
{
	json_t *root = results_json(bin, old_bin);
	bool ok = root && json_dump_file(root, path, JSON_INDENT(2)) == 0;

	if (root && !ok)
		fprintf(stderr, "bench: cannot write %s\n", path);
	json_decref(root);
	if (!ok || !json_verified(path))
		return false;
	fprintf(stderr, "wrote %s (%zu figures of %zu scenarios, read back and checked)\n", path,
		nrows, scenarios.n);
	return true;
}

static void free_results(void)
{
	for (size_t i = 0; i < nrows; i++) {
		free(rows[i].scenario);
		free(rows[i].metric);
	}
	free(rows);
	rows = NULL;
	nrows = rows_cap = 0;
	strs_free(&scenarios);
	strs_free(&failures);
	if (tls_trust)
		gnutls_certificate_free_credentials(tls_trust);
	tls_trust = NULL;
}

/* ----- Session heartbeats against one renew per lock ----- */

/* A holding's lease in these scenarios: no renew or heartbeat may need
 * more than it. */
#define HB_TTL "60000"
/* The floor's locks: what a client without sessions renews one by one. */
#define HB_FLOOR_LOCKS 100
#define HB_MAX_BEATS (1 << 17)

/* One side of the heartbeat scenarios: a beat is npaths POSTs sent one
 * after the other on one keep-alive connection (a session: its one
 * heartbeat; the floor: each lock's renew), repeated for `seconds`. */
struct beats {
	double p50_ms, p99_ms, per_s;	/* beat latency; beats a second */
	double cmds, evalsha, dlockd_us, redis_us;	/* per beat */
	long n;
};

/* Each answer must be 200; with want >= 0 (a session's heartbeat) it
 * must list want holdings and drop none. False (scenario failed) if not. */
static bool beats_run(const char *scenario, const char *side, char *const *paths, int npaths,
		      int want, struct beats *b)
{
	int64_t *lat = xmalloc_or_die(calloc(HB_MAX_BEATS, sizeof(*lat)));
	int64_t t0, until;
	long long c0, c1, e0, e1;
	double r0, r1, d0, d1;
	struct conn c;
	bool ok = true;

	*b = (struct beats){ 0 };
	if (conn_open(&c, http_port) < 0) {
		fail(scenario, "%s: cannot connect to dlockd", side);
		free(lat);
		return false;
	}
	target_usage(NULL, &c0, &e0, &r0);
	d0 = proc_cpu_us(dlockd_pid);
	t0 = now_us();
	until = t0 + (int64_t)(seconds * 1e6);
	while (ok && now_us() < until && b->n < HB_MAX_BEATS) {
		int64_t at = now_us();

		for (int i = 0; ok && i < npaths; i++) {
			const char *body = "", *p;
			int st = http_req(&c, "POST", paths[i], &body), kinds = 0;

			for (p = body; want >= 0 && (p = strstr(p, "\"kind\"")); p++)
				kinds++;
			if (st != 200 || (want >= 0 && kinds != want)) {
				fail(scenario, "%s: POST %s: %d, %d holdings listed, want %d: %.200s",
				     side, paths[i], st, kinds, want, answer_of(&c, st));
				ok = false;
			}
		}
		lat[b->n++] = now_us() - at;
	}
	b->per_s = (double)b->n / ((double)(now_us() - t0) / 1e6);
	target_usage(NULL, &c1, &e1, &r1);
	d1 = proc_cpu_us(dlockd_pid);
	conn_close(&c);
	if (ok && b->n) {
		qsort(lat, (size_t)b->n, sizeof(*lat), cmp_i64);
		b->p50_ms = (double)lat[b->n / 2] / 1000.0;
		b->p99_ms = (double)lat[b->n * 99 / 100] / 1000.0;
		b->cmds = (double)(c1 - c0) / (double)b->n;
		b->evalsha = (double)(e1 - e0) / (double)b->n;
		b->dlockd_us = (d1 - d0) / (double)b->n;
		b->redis_us = (r1 - r0) / (double)b->n;
	} else if (ok) {
		fail(scenario, "%s: no heartbeat completed", side);
		ok = false;
	}
	free(lat);
	return ok;
}

/* One request that must answer want; false (scenario failed) if not. */
static bool setup_req(const char *scenario, struct conn *c, const char *method, const char *path,
		      int want, const char **body)
{
	int st = http_req(c, method, path, body);

	if (st == want)
		return true;
	fail(scenario, "%s %s: %d %.200s", method, path, st, answer_of(c, st));
	return false;
}

/* The heartbeat of a session holding `holdings` locks (made, filled and
 * ended here) against the floor f: HB_FLOOR_LOCKS renews. */
static void session_beats(int holdings, const struct beats *f)
{
	char scenario[96], path[300], id[41], *hb = path;
	const char *body, *p;
	struct beats s;
	struct conn c;
	bool ok;

	snprintf(scenario, sizeof(scenario), "session heartbeat, %d holdings", holdings);
	if (!scenario_begin(scenario))
		return;
	if (conn_open(&c, http_port) < 0) {
		fail(scenario, "cannot connect to dlockd");
		return;
	}
	ok = setup_req(scenario, &c, "POST", "/sessions?ttl_ms=" HB_TTL, 201, &body);
	p = ok ? strstr(body, "\"session\":\"") : NULL;
	if (ok && (!p || sscanf(p + 11, "%40[0-9a-f]", id) != 1)) {
		fail(scenario, "POST /sessions: no session id in %.200s", body);
		ok = false;
	}
	for (int i = 0; ok && i < holdings; i++) {
		snprintf(path, sizeof(path), "/locks/bench-hb-%d-s%d-%d?session=%s", getpid(),
			 holdings, i, id);
		ok = setup_req(scenario, &c, "PUT", path, 200, NULL);
	}
	if (ok) {
		snprintf(path, sizeof(path), "/sessions/%s/heartbeat", id);
		if (beats_run(scenario, "session", &hb, 1, holdings, &s)) {
			result(scenario, "heartbeat p50 vs 100 renews", s.p50_ms, f->p50_ms, "ms");
			result(scenario, "heartbeat p99 vs 100 renews", s.p99_ms, f->p99_ms, "ms");
			result(scenario, "heartbeats/s vs 100 renews", s.per_s, f->per_s, "/s");
			result(scenario, "cmds incl. scripts' per heartbeat", s.cmds, f->cmds, "");
			result(scenario, "scripts per heartbeat", s.evalsha, f->evalsha, "");
			result(scenario, "dlockd CPU per heartbeat", s.dlockd_us, f->dlockd_us, "us");
			result(scenario, "Redis CPU per heartbeat", s.redis_us, f->redis_us, "us");
		}
	}
	if (ok) {
		snprintf(path, sizeof(path), "/sessions/%s", id);
		setup_req(scenario, &c, "DELETE", path, 200, NULL);
	}
	conn_close(&c);
}

/* Session heartbeats of 1, 10 and 100 holdings against what a client
 * without sessions pays to keep 100 locks: one renew each (the floor,
 * also a scenario of its own, measured first in the same run). */
static void session_heartbeats(void)
{
	static const int holdings[] = { 1, 10, 100 };
	const char *scenario = "session heartbeat floor: 100 separate renews";
	char *paths[HB_FLOOR_LOCKS] = { 0 }, path[300];
	bool any = false, ok = true, own;
	struct beats f;
	struct conn c;

	for (size_t i = 0; i < sizeof(holdings) / sizeof(holdings[0]); i++) {
		snprintf(path, sizeof(path), "session heartbeat, %d holdings", holdings[i]);
		any |= wanted(path);
	}
	if (!any)
		return;
	own = scenario_begin(scenario);	/* its own rows only when --only wants it */
	if (conn_open(&c, http_port) < 0) {
		fail(scenario, "cannot connect to dlockd");
		return;
	}
	for (int i = 0; ok && i < HB_FLOOR_LOCKS; i++) {
		snprintf(path, sizeof(path), "/locks/bench-hb-%d-f-%d", getpid(), i);
		paths[i] = xstrdup_printf("%s/heartbeat?owner=fb&ttl_ms=" HB_TTL, path);
		strcat(path, "?owner=fb&ttl_ms=" HB_TTL);
		ok = setup_req(scenario, &c, "PUT", path, 200, NULL);
	}
	if (ok && beats_run(scenario, "floor", paths, HB_FLOOR_LOCKS, -1, &f)) {
		if (own) {
			result(scenario, "100 renews p50", f.p50_ms, -1, "ms");
			result(scenario, "100 renews p99", f.p99_ms, -1, "ms");
			result(scenario, "cmds incl. scripts' per 100 renews", f.cmds, -1, "");
			result(scenario, "dlockd CPU per 100 renews", f.dlockd_us, -1, "us");
		}
		for (size_t i = 0; i < sizeof(holdings) / sizeof(holdings[0]); i++)
			session_beats(holdings[i], &f);
	}
	for (int i = 0; i < HB_FLOOR_LOCKS && paths[i]; i++) {
		snprintf(path, sizeof(path), "/locks/bench-hb-%d-f-%d?owner=fb", getpid(), i);
		http_req(&c, "DELETE", path, NULL);
		free(paths[i]);
	}
	conn_close(&c);
}

/* ----- main ----- */

static void run_scenarios(const char *bin)
{
	char s1[96], s16[96];
	long rss;
	int thr;

	if (scenario_begin("idle")) {
		proc_usage(dlockd_pid, &rss, &thr);
		result("idle", "RSS", (double)rss / 1024.0, -1, "MiB");
		result("idle", "threads", thr, -1, "");
		if (rss <= 0 || thr <= 0)
			fail("idle", "no RSS or thread count of dlockd (pid %d)", (int)dlockd_pid);
	}
	for (size_t i = 0; i < sizeof(lock_scenarios) / sizeof(lock_scenarios[0]); i++)
		versus(&lock_scenarios[i]);
	many_waiters(quick ? 1000 : 10000, 1, "locks", "one");
	many_waiters(quick ? 1000 : 10000, quick ? 1000 : 10000, "locks", "each");
	many_waiters(1000, 1, "fairlocks", "fair1k");
	if (!quick)
		many_waiters(10000, 1, "fairlocks", "fair10k");
	many_watchers(quick ? 1000 : 5000);
	session_heartbeats();
	tls_cost(bin, 1);
	tls_cost(bin, clients_for(16));
	redis_tls_cost(bin, 1);
	redis_tls_cost(bin, clients_for(16));
	/* before "sync replicas", which gives the standalone Redis a replica;
	 * sync replicas on the sentinel topology, not on the cluster */
	topology_bench("sentinel", sentinel_topology, 5);
	topology_bench("cluster", cluster_topology, 3);
	snprintf(s1, sizeof(s1), "sync replicas 1 vs off, lock, %d clients", 1);
	snprintf(s16, sizeof(s16), "sync replicas 1 vs off, lock, %d clients", clients_for(16));
	if (wanted(s1) || wanted(s16)) {
		if (start_replica()) {
			sync_cost(bin, 1);
			sync_cost(bin, clients_for(16));
		} else {
			fail("sync replicas 1 vs off", "the replica did not come online (%s/replica.log)",
			     dir);
		}
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: bench [--seconds S] [--rounds N] [--quick] [--only WORD] "
			"[--json FILE] [BIN | --compare OLD NEW]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *bin = "build/dlockd", *old_bin = NULL, *json_path = NULL;
	bool seconds_set = false, rounds_set = false, json_ok = true, json_default = false;
	struct rlimit rl;

	/* every client of a scenario is this one process's (10,000 waiters
	 * from 127.0.0.1): the per-client share of --max-connections would
	 * refuse some; an environment variable, which a dlockd of before it
	 * (--compare) ignores */
	setenv("DLOCKD_MAX_CONNECTIONS_PER_CLIENT", "1048576", 1);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			seconds = atof(argv[++i]);
			seconds_set = true;
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
			rounds_set = true;
		} else if (!strcmp(argv[i], "--quick")) {
			quick = true;
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
			json_path = argv[++i];
		} else if (!strcmp(argv[i], "--compare") && i + 2 < argc) {
			old_bin = argv[++i];
			bin = argv[++i];
		} else if (argv[i][0] == '-') {
			usage();
		} else {
			bin = argv[i];
		}
	}
	if (!rounds_set)
		rounds = quick ? 1 : old_bin ? 5 : 3;
	if (!seconds_set && quick)
		seconds = 0.5;
	if (rounds < 1 || rounds > MAX_ROUNDS || !(seconds > 0)) {
		fprintf(stderr, "bench: --rounds is 1 to %d, --seconds more than 0\n", MAX_ROUNDS);
		return 2;
	}
	if (access(bin, X_OK) || (old_bin && access(old_bin, X_OK))) {
		fprintf(stderr, "bench: %s is not an executable\n", access(bin, X_OK) ? bin : old_bin);
		return 2;
	}
	if (!json_path && !only && !quick && !old_bin) {
		json_path = "bench/results/latest.json";
		json_default = true;
		mkdir("bench/results", 0755);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	snprintf(dir, sizeof(dir), "/tmp/dlockd-bench.XXXXXX");
	if (!mkdtemp(dir))
		return 2;
	fprintf(stderr, "bench: logs in %s\n", dir);
	bench_bin = bin;
	start_all(old_bin ? old_bin : bin);
	atexit(stop_all);

	if (old_bin) {
		col_a = "new";
		col_b = "old";
		fprintf(stderr, "bench: old %s, new %s, %d round(s) of %.1f s each\n", old_bin, bin,
			rounds, seconds);
		for (size_t i = 0; i < sizeof(lock_scenarios) / sizeof(lock_scenarios[0]); i++)
			compare_scenario(&lock_scenarios[i], old_bin, bin);
	} else {
		run_scenarios(bin);
	}
	stop_processes(true);	/* the last dlockd's exit is checked too */
	check_rows();
	print_table();
	print_targets();
	if (!scenarios.n)
		fail(only ? only : "bench", "no scenario matches");
	if (json_default && failures.n)
		fprintf(stderr, "bench: %s left as it was: this run failed\n", json_path);
	else if (json_path)
		json_ok = write_json(json_path, bin, old_bin);
	else
		fprintf(stderr, "bench: no JSON written (--only, --quick and --compare write one "
				"with --json FILE)\n");
	if (failures.n) {
		fprintf(stderr, "\nbench: FAILED, %zu failure(s):\n", failures.n);
		for (size_t i = 0; i < failures.n; i++)
			fprintf(stderr, "  %s\n", failures.v[i]);
	} else if (json_ok) {
		fprintf(stderr, "\nbench: %zu scenario(s) measured, %zu figures, no errors\n",
			scenarios.n, nrows);
	} else {
		fprintf(stderr, "\nbench: FAILED: %s was not written or not read back whole\n",
			json_path);
	}
	json_ok = json_ok && !failures.n;
	free_results();
	return json_ok ? 0 : 1;
}
