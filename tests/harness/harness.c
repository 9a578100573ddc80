/* harness.c -- processes, clients and the runner of the integration suite.
 *
 * The runner owns every process it starts, like hiredis' test.sh: a private
 * directory from mkdtemp, redis-server bound to 127.0.0.1 on a free port,
 * dlockd on another, both stopped by pid at the end (and on a failed start).
 * Tests run one after another against the shared pair; each uses lock names
 * of its own, so they do not see each other's state.
 *
 * A failed CHECK returns from the test at once, so whatever the test still
 * had running is the runner's to end before the next test starts (end_test):
 * background requests (owned by the harness, never written into a test's
 * memory once its CHECK failed), test_at_end hooks, processes. A thread the
 * test started itself and left running stops the run. */
#include "harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct redis_srv H_redis;
struct dlockd_srv H_dlockd;
static char tmpdir[128];
static const char *dlockd_bin = "build/dlockd";

/* ----- Time ----- */

int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

bool chaos_full(void)
{
	const char *s = getenv("DLOCKD_CHAOS");

	return s && !strcmp(s, "full");
}

int slow_factor(void)
{
	const char *s = getenv("DLOCKD_SLOW");

	return s && *s == '1' ? 10 : 1;
}

/* ----- Processes ----- */

const char *test_tmpdir(void)
{
	return tmpdir;
}

int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Every process spawn() started and nobody has reaped yet, so that what a
 * failed test left running (it returns at its first failed CHECK) is
 * stopped before the next test. */
static struct {
	pthread_mutex_t lock;
	pid_t pid[512];
	int n;
} spawned = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void spawned_add(pid_t pid)
{
	pthread_mutex_lock(&spawned.lock);
	if (spawned.n < (int)(sizeof(spawned.pid) / sizeof(spawned.pid[0])))
		spawned.pid[spawned.n++] = pid;
	pthread_mutex_unlock(&spawned.lock);
}

/* Kill (by pid, our own children only) what is still running apart from
 * the shared Redis and dlockd; returns how many there were. */
static int stop_strays(void)
{
	int kept = 0, strays = 0;

	pthread_mutex_lock(&spawned.lock);
	for (int i = 0; i < spawned.n; i++) {
		pid_t pid = spawned.pid[i];

		if (pid == H_redis.pid || pid == H_dlockd.pid) {
			spawned.pid[kept++] = pid;
		} else if (waitpid(pid, NULL, WNOHANG) == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			strays++;
		}
	}
	spawned.n = kept;
	pthread_mutex_unlock(&spawned.lock);
	return strays;
}

static pid_t spawn(const char *const argv[], const char *log_path)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		setpgid(0, 0);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (pid > 0)
		spawned_add(pid);
	return pid;
}

void proc_start(struct proc *p, const char *const argv[], const char *const env[],
		const char *tag)
{
	static int seq;

	memset(p, 0, sizeof(*p));
	seq++;
	snprintf(p->out, sizeof(p->out), "%s/proc-%s-%d.out", tmpdir, tag, seq);
	snprintf(p->err, sizeof(p->err), "%s/proc-%s-%d.err", tmpdir, tag, seq);
	p->pid = fork();
	if (p->pid == 0) {
		int out = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = open(p->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		setpgid(0, 0);
		if (out < 0 || err < 0)
			_exit(127);
		dup2(out, 1);
		dup2(err, 2);
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (p->pid > 0) {
		setpgid(p->pid, p->pid);
		spawned_add(p->pid);
	}
}

bool proc_exited(struct proc *p)
{
	if (!p->reaped && p->pid > 0 && waitpid(p->pid, &p->status, WNOHANG) == p->pid)
		p->reaped = true;
	return p->reaped;
}

bool proc_exit_code(struct proc *p, int code)
{
	return proc_exited(p) && WIFEXITED(p->status) && WEXITSTATUS(p->status) == code;
}

void proc_kill(struct proc *p)
{
	if (p->pid > 0 && !proc_exited(p)) {
		kill(-p->pid, SIGKILL);
		waitpid(p->pid, &p->status, 0);
		p->reaped = true;
	}
}

const char *file_read(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, cap - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
	return buf;
}

int doc_sh_run(const char *path, const char *marker, int timeout_ms, char *out, size_t cap)
{
	static char doc[65536];
	char script[400], env_url[160];
	const char *const argv[] = { "sh", script, NULL };
	const char *const env[] = { env_url, NULL };
	const char *start, *end;
	struct proc p;
	size_t n;
	FILE *f;

	out[0] = '\0';
	file_read(path, doc, sizeof(doc));
	start = strstr(doc, marker);
	start = start ? strstr(start, "```sh\n") : NULL;
	end = start ? strstr(start + 6, "```") : NULL;
	if (!end)
		return -1;
	start += 6;
	snprintf(script, sizeof(script), "%s/doc-block.sh", test_tmpdir());
	f = fopen(script, "w");
	if (!f)
		return -1;
	fwrite(start, 1, (size_t)(end - start), f);
	fclose(f);
	snprintf(env_url, sizeof(env_url), "DLOCKD=%s", H_dlockd.base);
	proc_start(&p, argv, env, "doc-block");
	if (!WAIT_FOR(proc_exited(&p), timeout_ms)) {
		proc_kill(&p);
		return -2;
	}
	file_read(p.out, out, cap);
	if (proc_exit_code(&p, 0))
		return 0;
	n = strlen(out);
	if (n + 1 < cap)
		file_read(p.err, out + n, cap - n);
	return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -2;
}

bool session_start_on(const char *base, int ttl_ms, char *id)
{
	struct http_resp r;
	char p[64];
	bool ok;

	snprintf(p, sizeof(p), "/sessions?ttl_ms=%d", ttl_ms);
	if (base ? http_on(base, "POST", p, NULL, &r) : http("POST", p, NULL, &r))
		return false;
	ok = r.status == 201 && json_str(&r, "session") && strlen(json_str(&r, "session")) == 32;
	if (ok)
		snprintf(id, 33, "%s", json_str(&r, "session"));
	http_free(&r);
	return ok;
}

static bool pid_alive(pid_t pid)
{
	return pid > 0 && waitpid(pid, NULL, WNOHANG) == 0;
}

int redis_start(struct redis_srv *r)
{
	char port[16], log[300], tls_port[16];
	const char *argv[48];
	int argc = 0;
	char extra[256], *save = NULL;

	if (!r->port)
		r->port = free_port();
	if (r->tls_port < 0)
		r->tls_port = free_port();
	if ((r->tls_only || r->tls_port) && !pki_ready()) {
		fprintf(stderr, "# openssl could not make the test certificates in %s\n", pki_dir());
		return -1;
	}
	if (!r->dir[0]) {
		snprintf(r->dir, sizeof(r->dir), "%s/redis-%d", tmpdir, r->port);
		mkdir(r->dir, 0755);
	}
	snprintf(port, sizeof(port), "%d", r->port);
	snprintf(tls_port, sizeof(tls_port), "%d", r->tls_only ? r->port : r->tls_port);
	snprintf(log, sizeof(log), "%s/redis.log", r->dir);
	argv[argc++] = "redis-server";
	if (r->conf[0])
		argv[argc++] = r->conf;	/* first, as redis-server wants it */
	argv[argc++] = "--port";
	argv[argc++] = r->tls_only ? "0" : port;
	if (r->tls_only || r->tls_port) {
		argv[argc++] = "--tls-port";
		argv[argc++] = tls_port;
		argv[argc++] = "--tls-cert-file";
		argv[argc++] = pki_path("node.pem");
		argv[argc++] = "--tls-key-file";
		argv[argc++] = pki_path("node.key");
		argv[argc++] = "--tls-ca-cert-file";
		argv[argc++] = pki_path("ca.pem");
		argv[argc++] = "--tls-auth-clients";
		argv[argc++] = "no";
	}
	argv[argc++] = "--bind";
	argv[argc++] = "127.0.0.1";
	argv[argc++] = "--dir";
	argv[argc++] = r->dir;
	argv[argc++] = "--save";
	argv[argc++] = "";
	argv[argc++] = "--daemonize";
	argv[argc++] = "no";
	snprintf(extra, sizeof(extra), "%s", r->extra);
	for (char *tok = strtok_r(extra, " ", &save); tok && argc < 46;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	r->pid = spawn(argv, log);
	for (int i = 0; r->tls_only && i < 100; i++) {
		char pong[16];

		/* no hiredis over TLS: ask redis-cli, which is slower */
		if (redis_tls_cli(r, "PING", pong, sizeof(pong)) == 0 && !strcmp(pong, "PONG"))
			return 0;
		if (!pid_alive(r->pid))
			break;
		sleep_ms(50);
	}
	for (int i = 0; !r->tls_only && i < 500; i++) {
		redisContext *c = redis_client(r);
		redisReply *rep = c ? redisCommand(c, "PING") : NULL;
		bool ok = rep && rep->type == REDIS_REPLY_STATUS;

		if (rep)
			freeReplyObject(rep);
		if (c)
			redisFree(c);
		if (ok)
			return 0;
		if (!pid_alive(r->pid))
			break;
		sleep_ms(10);
	}
	fprintf(stderr, "# redis-server on port %d did not start; see %s\n", r->port, log);
	return -1;
}

int redis_tls_cli(const struct redis_srv *r, const char *args, char *out, size_t cap)
{
	char cmd[1024];
	FILE *p;
	int rc;

	if (cap)
		out[0] = '\0';
	snprintf(cmd, sizeof(cmd), "redis-cli --tls --cacert %s --cert %s --key %s -h 127.0.0.1 "
		 "-p %d %s 2>/dev/null", pki_path("ca.pem"), pki_path("client.pem"),
		 pki_path("client.key"), r->tls_only ? r->port : r->tls_port, args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	for (size_t n = 0; (rc = fgetc(p)) != EOF;)
		if (n + 1 < cap) {
			out[n++] = rc == '\n' ? ' ' : (char)rc;
			out[n] = '\0';
		}
	if (cap && *out && out[strlen(out) - 1] == ' ')
		out[strlen(out) - 1] = '\0';
	rc = pclose(p);
	return rc < 0 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void redis_stop(struct redis_srv *r, bool hard)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, hard ? SIGKILL : SIGTERM);
	waitpid(r->pid, NULL, 0);
	r->pid = 0;
}

const char *dlockd_binary(void)
{
	return dlockd_bin;
}

const char *dlockd_use_bin(const char *bin)
{
	const char *old = dlockd_bin;

	dlockd_bin = bin;
	return old;
}

/* Start dlockd on d->port with d->redis_url and flags; wait for /healthz. */
static int dlockd_spawn(struct dlockd_srv *d, const char *const *flags)
{
	char listen[64];
	const char *argv[48];
	int argc = 0;
	const char *prefix = getenv("DLOCKD_PREFIX");
	char pbuf[512], *save = NULL;

	bool tls = false;

	for (const char *const *f = flags; f && *f; f++)
		tls |= !strcmp(*f, "--tls-cert");
	snprintf(listen, sizeof(listen), "%s:%d", d->host, d->port);
	snprintf(d->base, sizeof(d->base), "%s://%s:%d", tls ? "https" : "http", d->host, d->port);
	if (prefix && *prefix) {
		snprintf(pbuf, sizeof(pbuf), "%s", prefix);
		for (char *tok = strtok_r(pbuf, " ", &save); tok && argc < 20;
		     tok = strtok_r(NULL, " ", &save))
			argv[argc++] = tok;
	}
	argv[argc++] = dlockd_bin;
	argv[argc++] = "--listen";
	argv[argc++] = listen;
	argv[argc++] = "--redis";
	argv[argc++] = d->redis_url;
	for (; flags && *flags && argc < 46; flags++)
		argv[argc++] = *flags;
	argv[argc] = NULL;
	d->pid = spawn(argv, d->log);
	for (int i = 0; i < 1000 * slow_factor(); i++) {
		struct http_resp r;

		if (http_on(d->base, "GET", "/healthz", NULL, &r) == 0 && r.status == 200) {
			http_free(&r);
			return 0;
		}
		http_free(&r);
		if (!pid_alive(d->pid))
			break;
		sleep_ms(10);
	}
	fprintf(stderr, "# dlockd did not start; see %s\n", d->log);
	return -1;
}

int dlockd_start(struct dlockd_srv *d, const char *redis_url, const char *const *flags)
{
	return dlockd_start_at(d, "127.0.0.1", redis_url, flags);
}

int dlockd_start_at(struct dlockd_srv *d, const char *host, const char *redis_url,
		    const char *const *flags)
{
	snprintf(d->host, sizeof(d->host), "%s", host);
	d->port = free_port();
	if (redis_url)
		snprintf(d->redis_url, sizeof(d->redis_url), "%s", redis_url);
	else
		snprintf(d->redis_url, sizeof(d->redis_url), "redis://127.0.0.1:%d/0", H_redis.port);
	/* another namespace's ports are not this one's: the host tells
	 * their logs apart */
	if (strcmp(host, "127.0.0.1"))
		snprintf(d->log, sizeof(d->log), "%s/dlockd-%s-%d.log", tmpdir, host, d->port);
	else
		snprintf(d->log, sizeof(d->log), "%s/dlockd-%d.log", tmpdir, d->port);
	/* a port used before by another test's dlockd: its log is that one's
	 * (the checks read a log's first 64 KiB, where this one's must be) */
	unlink(d->log);
	return dlockd_spawn(d, flags);
}

int dlockd_start_on(struct dlockd_srv *d, const struct redis_srv *rs, const char *const *flags)
{
	char url[64];

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", rs->port);
	return dlockd_start(d, url, flags);
}

int redis_dlockd_start(struct redis_srv *rs, struct dlockd_srv *d, const char *const *flags)
{
	if (redis_start(rs) < 0)
		return -1;
	return dlockd_start_on(d, rs, flags);
}

int redis_dlockd_stop(struct redis_srv *rs, struct dlockd_srv *d, int timeout_ms)
{
	int rc = dlockd_stop(d, timeout_ms);

	redis_stop(rs, false);
	return rc;
}

int dlockd_start_auth(struct dlockd_srv *d, const char *name, const char *tokens)
{
	char file[300];
	const char *flags[] = { "--auth-file", file, NULL };
	FILE *f;

	snprintf(file, sizeof(file), "%s/%s", tmpdir, name);
	f = fopen(file, "w");
	if (!f) {
		fprintf(stderr, "# cannot write %s: %s\n", file, strerror(errno));
		return -1;
	}
	fputs(tokens, f);
	if (fclose(f) != 0) {
		fprintf(stderr, "# cannot write %s: %s\n", file, strerror(errno));
		return -1;
	}
	return dlockd_start(d, NULL, flags);
}

int dlockd_restart(struct dlockd_srv *d, const char *const *flags)
{
	return dlockd_spawn(d, flags);
}

void dlockd_kill(struct dlockd_srv *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
}

int dlockd_stop(struct dlockd_srv *d, int timeout_ms)
{
	int64_t until = mono_ms() + (int64_t)timeout_ms * slow_factor();
	int status;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	while (mono_ms() < until) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		sleep_ms(10);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
	return -1;
}

/* A number field of /proc/<pid>/status, e.g. "Threads:"; -1 if absent. */
static long proc_status(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t len = strlen(field);
	FILE *f;
	long n = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len)) {
			n = strtol(line + len, NULL, 10);
			break;
		}
	fclose(f);
	return n;
}

int proc_threads(pid_t pid)
{
	return (int)proc_status(pid, "Threads:");
}

long proc_rss_kib(pid_t pid)
{
	return proc_status(pid, "VmRSS:");
}

/* ----- HTTP client ----- */

struct buf {
	char *p;
	size_t n;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *cls)
{
	struct buf *b = cls;
	size_t len = size * nmemb;

	b->p = realloc(b->p, b->n + len + 1);
	memcpy(b->p + b->n, data, len);
	b->n += len;
	b->p[b->n] = '\0';
	return len;
}

static void copy_header(const char *line, size_t len, const char *name, char *out, size_t cap)
{
	size_t nlen = strlen(name);

	if (len > nlen + 1 && !strncasecmp(line, name, nlen) && line[nlen] == ':') {
		const char *v = line + nlen + 1;
		size_t vlen = len - nlen - 1;

		while (vlen && (*v == ' '))
			v++, vlen--;
		while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n'))
			vlen--;
		if (vlen >= cap)
			vlen = cap - 1;
		memcpy(out, v, vlen);
		out[vlen] = '\0';
	}
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *cls)
{
	struct http_resp *r = cls;
	size_t len = size * nmemb;

	copy_header(data, len, "Retry-After", r->retry_after, sizeof(r->retry_after));
	copy_header(data, len, "Allow", r->allow, sizeof(r->allow));
	copy_header(data, len, "Content-Type", r->content_type, sizeof(r->content_type));
	copy_header(data, len, "X-Request-Id", r->request_id, sizeof(r->request_id));
	return len;
}

static __thread const char *bearer;
static __thread const char *extra_header;
/* Set on a background request's thread: its requests give up (status -1)
 * once *http_abort is non-zero. */
static __thread const int *http_abort;

static int on_progress(void *cls, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return __atomic_load_n((const int *)cls, __ATOMIC_ACQUIRE) != 0;
}

void http_bearer(const char *token)
{
	bearer = token;
}

void http_extra_header(const char *header)
{
	extra_header = header;
}

void http_abort_when(const int *flag)
{
	http_abort = flag;
}

/* http_tls()'s settings, copied. */
struct tls_conf {
	bool on;
	char ca[300], cert[300], key[300];
	bool fresh;
};
static __thread struct tls_conf tls_conf;

void http_tls(const struct http_tls *t)
{
	memset(&tls_conf, 0, sizeof(tls_conf));
	if (!t)
		return;
	tls_conf.on = true;
	snprintf(tls_conf.ca, sizeof(tls_conf.ca), "%s", t->ca ? t->ca : "");
	snprintf(tls_conf.cert, sizeof(tls_conf.cert), "%s", t->cert ? t->cert : "");
	snprintf(tls_conf.key, sizeof(tls_conf.key), "%s", t->key ? t->key : "");
	tls_conf.fresh = t->fresh;
}

/* The TLS options of a request to an https:// URL. */
static void tls_setup(CURL *c)
{
	if (tls_conf.ca[0]) {
		curl_easy_setopt(c, CURLOPT_CAINFO, tls_conf.ca);
	} else {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (tls_conf.cert[0]) {
		curl_easy_setopt(c, CURLOPT_SSLCERT, tls_conf.cert);
		curl_easy_setopt(c, CURLOPT_SSLKEY, tls_conf.key);
	}
	if (tls_conf.fresh) {
		curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	}
	curl_easy_setopt(c, CURLOPT_CERTINFO, 1L);
}

/* The subject of the server's certificate, if this transfer made the
 * handshake. */
static void peer_subject(CURL *c, struct http_resp *r)
{
	struct curl_certinfo *ci = NULL;

	if (curl_easy_getinfo(c, CURLINFO_CERTINFO, &ci) != CURLE_OK || !ci || ci->num_of_certs < 1)
		return;
	for (struct curl_slist *l = ci->certinfo[0]; l; l = l->next)
		if (!strncmp(l->data, "Subject:", 8))
			snprintf(r->peer_subject, sizeof(r->peer_subject), "%s", l->data + 8);
}

/* With DLOCKD_CONTRACT_LOG set, every response is appended to that file as
 * one JSON line {method, path, status, content_type, body}, for
 * tests/contract/validate.mjs to check against openapi.yaml. */
static pthread_mutex_t contract_lock = PTHREAD_MUTEX_INITIALIZER;

static void contract_record(const char *method, const char *path, const struct http_resp *r)
{
	const char *file = getenv("DLOCKD_CONTRACT_LOG");
	const char *q = strchr(path, '?');
	json_t *j;
	char *line;
	FILE *f;

	if (!file || !*file)
		return;
	j = json_pack("{s:s, s:s%, s:i, s:s, s:s}", "method", method, "path", path,
		      q ? (size_t)(q - path) : strlen(path), "status", (int)r->status,
		      "content_type", r->content_type, "body", r->body ? r->body : "");
	line = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	pthread_mutex_lock(&contract_lock);
	f = line ? fopen(file, "a") : NULL;
	if (f) {
		fprintf(f, "%s\n", line);
		fclose(f);
	}
	pthread_mutex_unlock(&contract_lock);
	free(line);
}

/* One keep-alive handle per thread, like a real client. */
static pthread_key_t curl_key;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_key_make(void)
{
	pthread_key_create(&curl_key, (void (*)(void *))curl_easy_cleanup);
}

int http_on(const char *base, const char *method, const char *path, const char *body,
	    struct http_resp *r)
{
	struct buf b = { 0 };
	char url[8192];	/* the longest request the contract allows fits */
	CURL *c;
	CURLcode rc;
	int64_t t0 = mono_ms();
	struct curl_slist *hdrs = NULL;

	memset(r, 0, sizeof(*r));
	pthread_once(&curl_once, curl_key_make);
	c = pthread_getspecific(curl_key);
	if (!c) {
		c = curl_easy_init();
		pthread_setspecific(curl_key, c);
	}
	curl_easy_reset(c);
	snprintf(url, sizeof(url), "%s%s", base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L * slow_factor());
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (http_abort) {	/* called at least once a second, also while idle */
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)http_abort);
	}
	if (!strncmp(url, "https:", 6))
		tls_setup(c);
	if (bearer) {
		char h[512];

		snprintf(h, sizeof(h), "Authorization: Bearer %s", bearer);
		hdrs = curl_slist_append(hdrs, h);
	}
	if (extra_header)
		hdrs = curl_slist_append(hdrs, extra_header);
	if (body)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (hdrs)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	rc = curl_easy_perform(c);
	curl_slist_free_all(hdrs);
	r->ms = (double)(mono_ms() - t0);
	if (rc != CURLE_OK) {
		free(b.p);
		r->status = -1;
		return -1;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	peer_subject(c, r);
	r->body = b.p ? b.p : strdup("");
	r->json = json_loads(r->body, 0, NULL);
	contract_record(method, path, r);
	return 0;
}

int http(const char *method, const char *path, const char *body, struct http_resp *r)
{
	return http_on(H_dlockd.base, method, path, body, r);
}

long req(const char *method, const char *path, struct http_resp *out)
{
	struct http_resp r;
	long st;

	http(method, path, NULL, &r);
	st = r.status;
	if (out)
		*out = r;
	else
		http_free(&r);
	return st;
}

void http_free(struct http_resp *r)
{
	free(r->body);
	if (r->json)
		json_decref(r->json);
	r->body = NULL;
	r->json = NULL;
}

const char *json_str(const struct http_resp *r, const char *key)
{
	json_t *v = r->json ? json_object_get(r->json, key) : NULL;

	return v && json_is_string(v) ? json_string_value(v) : NULL;
}

long long json_int(const struct http_resp *r, const char *key)
{
	json_t *v = r->json ? json_object_get(r->json, key) : NULL;

	return v && json_is_integer(v) ? json_integer_value(v) : -999999;
}

int json_bool(const struct http_resp *r, const char *key)
{
	json_t *v = r->json ? json_object_get(r->json, key) : NULL;

	return v && json_is_boolean(v) ? json_is_true(v) : -1;
}

double metric_value(const struct dlockd_srv *d, const char *name)
{
	struct http_resp r;
	double v = -1;
	size_t n = strlen(name);

	if (http_on(d->base, "GET", "/metrics", NULL, &r) == 0 && r.status == 200) {
		v = 0;	/* a series that never moved is not listed */
		for (char *line = r.body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
			if (!strncmp(line, name, n) && line[n] == ' ') {
				v = strtod(line + n + 1, NULL);
				break;
			}
		}
	}
	http_free(&r);
	return v;
}

/* ----- Helpers for lock tests ----- */

static const struct dlockd_srv *or_shared(const struct dlockd_srv *d)
{
	return d ? d : &H_dlockd;
}

long status_of(const struct dlockd_srv *d, const char *method, const char *fmt, ...)
{
	char p[1024];
	struct http_resp r;
	va_list ap;
	long st;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	http_on(or_shared(d)->base, method, p, NULL, &r);
	st = r.status;
	http_free(&r);
	return st;
}

int flag_of(const struct dlockd_srv *d, const char *key, const char *fmt, ...)
{
	char p[1024];
	struct http_resp r;
	va_list ap;
	int v = -1;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	if (http_on(or_shared(d)->base, "GET", p, NULL, &r) == 0 && r.status == 200)
		v = json_bool(&r, key);
	http_free(&r);
	return v;
}

bool lock_hold(const struct dlockd_srv *d, const char *name, const char *owner, int ttl_ms)
{
	char p[1024];
	struct http_resp r;
	bool ok;

	snprintf(p, sizeof(p), "/locks/%s?owner=%s&ttl_ms=%d", name, owner, ttl_ms);
	http_on(or_shared(d)->base, "PUT", p, NULL, &r);
	ok = r.status == 200;
	if (!ok)	/* the caller's CHECK says where; this says why */
		printf("# PUT %s: status %ld, body %s\n", p, r.status, r.body ? r.body : "(none)");
	http_free(&r);
	return ok;
}

long lock_release(const struct dlockd_srv *d, const char *name, const char *owner)
{
	return status_of(d, "DELETE", "/locks/%s?owner=%s", name, owner);
}

double waiters_of(const struct dlockd_srv *d)
{
	return metric_value(or_shared(d), "dlockd_waiters");
}

bool wait_waiters(const struct dlockd_srv *d, int n, int timeout_ms)
{
	return WAIT_FOR(waiters_of(d) >= n, timeout_ms);
}

bool wait_no_waiters(const struct dlockd_srv *d, int timeout_ms)
{
	return WAIT_FOR(waiters_of(d) == 0, timeout_ms);
}

long long channel_subscribers(const struct redis_srv *rs, const char *fmt, ...)
{
	char chan[1024];
	redisContext *c = rs ? redis_client(rs) : NULL;
	redisReply *r;
	va_list ap;
	long long n = -1;

	va_start(ap, fmt);
	vsnprintf(chan, sizeof(chan), fmt, ap);
	va_end(ap);
	if (rs)
		r = c ? redisCommand(c, "PUBSUB NUMSUB %s", chan) : NULL;
	else
		r = rcmd("PUBSUB NUMSUB %s", chan);
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_INTEGER)
		n = r->element[1]->integer;
	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	return n;
}

long long redis_subscribers(const struct redis_srv *s, bool sharded, const char *chan)
{
	redisReply *r = rcmd_on(s, sharded ? "PUBSUB SHARDNUMSUB %s" : "PUBSUB NUMSUB %s", chan);
	long long n = -1;

	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_INTEGER)
		n = r->element[1]->integer;
	if (r)
		freeReplyObject(r);
	return n;
}

bool is_script_command(const char *cmd)
{
	return cmd && (!strcasecmp(cmd, "fcall") || !strcasecmp(cmd, "evalsha") ||
		       !strcasecmp(cmd, "eval"));
}

long long script_calls_of(const char *info, bool with_eval)
{
	static const char *const cmds[] = { "cmdstat_evalsha:calls=", "cmdstat_fcall:calls=",
					    "cmdstat_eval:calls=" };
	long long calls = 0;

	for (size_t i = 0; info && i < (with_eval ? 3 : 2); i++) {
		const char *p = strstr(info, cmds[i]);

		if (p)
			calls += strtoll(p + strlen(cmds[i]), NULL, 10);
	}
	return calls;
}

long long redis_cmdstat(const struct redis_srv *rs, const char *cmd, const char *field)
{
	redisReply *r = rs ? rcmd_on(rs, "INFO commandstats") : rcmd("INFO commandstats");
	char key[64], want[48];
	const char *p, *f, *eol;
	long long n = 0;

	snprintf(key, sizeof(key), "cmdstat_%s:", cmd);
	snprintf(want, sizeof(want), "%s=", field);
	if (r && r->type == REDIS_REPLY_STRING && (p = strstr(r->str, key))) {
		p += strlen(key);
		eol = strchr(p, '\n');
		for (f = p; f && (!eol || f < eol); f = strchr(f, ','), f = f ? f + 1 : NULL)
			if (!strncmp(f, want, strlen(want))) {
				n = strtoll(f + strlen(want), NULL, 10);
				break;
			}
	}
	if (r)
		freeReplyObject(r);
	return n;
}

long long redis_commands_run(const struct redis_srv *rs)
{
	redisReply *r = rcmd_on(rs, "INFO commandstats");
	long long n = 0;

	for (const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
	     p && (p = strstr(p, "cmdstat_")); p++) {
		const char *calls = strstr(p, ":calls=");

		if (calls && strncmp(p, "cmdstat_info:", 13) && strncmp(p, "cmdstat_config|", 15))
			n += strtoll(calls + 7, NULL, 10);
	}
	if (r)
		freeReplyObject(r);
	return n;
}

long long redis_time_ms(const struct redis_srv *rs)
{
	redisReply *t = rs ? rcmd_on(rs, "TIME") : rcmd("TIME");
	long long ms = 0;

	if (t && t->type == REDIS_REPLY_ARRAY && t->elements == 2)
		ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
	if (t)
		freeReplyObject(t);
	return ms;
}

long long redis_script_calls(const struct redis_srv *s)
{
	redisReply *r = rcmd_on(s, "INFO commandstats");
	long long calls = script_calls_of(r && r->type == REDIS_REPLY_STRING ? r->str : NULL, true);

	if (r)
		freeReplyObject(r);
	return calls;
}

/* The scripts node has run, counted as wait_parked_on's caller counts them
 * (NULL: the shared Redis, as redis_scripts_called() counts them). */
static long long scripts_of(const struct redis_srv *node)
{
	return node ? redis_script_calls(node) : redis_scripts_called();
}

/* The n waiters whose first tries node ran since scripts0 are past the
 * retry each may owe: one that joined a channel not yet live tries again
 * once it is (2 scripts in all); one that found it live and heard nothing
 * since sleeps at once (1). With fewer than 2n, wait until node has run no
 * script for a while: a retry owed follows its confirmation at once. */
static bool past_retries(const struct redis_srv *node, int n, long long scripts0)
{
	int quiet_ms = 300 * slow_factor();

	for (int tries = 0; tries < 50; tries++) {
		long long before = scripts_of(node);

		if (before >= scripts0 + 2LL * n)
			return true;
		sleep_ms(quiet_ms);
		if (scripts_of(node) == before)
			return true;
	}
	return false;
}

bool wait_parked_on(const struct dlockd_srv *d, const struct redis_srv *node, long long scripts0,
		    const struct redis_srv *sub, bool sharded, const char *chan)
{
	return wait_waiters(d, 1, 10000) &&
	       WAIT_FOR(redis_subscribers(sub, sharded, chan) >= 1 &&
				redis_script_calls(node) >= scripts0 + 1,
			10000) &&
	       past_retries(node, 1, scripts0);
}

bool wait_parked(const struct dlockd_srv *d, int n, long long scripts0, int timeout_ms,
		 const char *chan_fmt, ...)
{
	char chan[1024] = "";
	va_list ap;

	if (chan_fmt) {
		va_start(ap, chan_fmt);
		vsnprintf(chan, sizeof(chan), chan_fmt, ap);
		va_end(ap);
	}
	return WAIT_FOR(waiters_of(d) >= n && redis_scripts_called() >= scripts0 + n &&
			(!chan_fmt || channel_subscribers(NULL, "%s", chan) >= 1), timeout_ms) &&
	       past_retries(NULL, n, scripts0);
}

/* ----- Background requests ----- */

/* One background request, owned by the harness from bg_start until it is
 * joined: by bg_join, or by the runner after the test (bg_join_all). The
 * thread reads and writes only this; it writes into the test's struct bg
 * (owner) only under bgs.lock and only while owner is set. Whoever takes
 * a request back from the test clears owner under that lock first. */
struct bg_run {
	pthread_t thread;
	struct bg *owner;	/* the test's; NULL once taken back */
	char base[128], method[8];
	char *path, *body;
	struct tls_conf tls;	/* the starting thread's */
	const char *bearer;	/* the starting thread's http_bearer() */
	int abort;		/* atomic: make the request give up */
	bool done;		/* the thread is about to end */
	struct bg_run *next;
};

static struct {
	pthread_mutex_t lock;
	struct bg_run *running;	/* started and not joined yet */
	struct bg_run *hung;	/* did not end when aborted: never freed */
} bgs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void *bg_main(void *arg)
{
	struct bg_run *run = arg;
	struct http_resp r;
	int64_t done_ms;

	http_abort = &run->abort;
	tls_conf = run->tls;
	bearer = run->bearer;
	http_on(run->base, run->method, run->path, run->body, &r);
	done_ms = mono_ms();
	pthread_mutex_lock(&bgs.lock);
	if (run->owner) {
		run->owner->r = r;
		__atomic_store_n(&run->owner->done_ms, done_ms, __ATOMIC_RELEASE);
	} else {
		http_free(&r);
	}
	run->done = true;
	pthread_mutex_unlock(&bgs.lock);
	return NULL;
}

static void bg_run_free(struct bg_run *run)
{
	free(run->path);
	free(run->body);
	free(run);
}

void bg_start_on(struct bg *b, const char *base, const char *method, const char *path,
		 const char *body)
{
	struct bg_run *run = calloc(1, sizeof(*run));
	bool restarted = false;
	int rc;

	memset(b, 0, sizeof(*b));
	snprintf(run->base, sizeof(run->base), "%s", base);
	snprintf(run->method, sizeof(run->method), "%s", method);
	run->path = strdup(path);
	run->body = body ? strdup(body) : NULL;
	run->owner = b;
	run->tls = tls_conf;
	run->bearer = bearer;
	pthread_mutex_lock(&bgs.lock);
	for (struct bg_run *o = bgs.running; o; o = o->next)
		if (o->owner == b) {	/* started again before its bg_join */
			o->owner = NULL;
			__atomic_store_n(&o->abort, 1, __ATOMIC_RELEASE);
			restarted = true;
		}
	rc = pthread_create(&run->thread, NULL, bg_main, run);
	if (rc == 0) {
		run->next = bgs.running;
		bgs.running = run;
		b->run = run;
	}
	pthread_mutex_unlock(&bgs.lock);
	if (rc != 0) {
		bg_run_free(run);
		b->r.status = -1;
		b->done_ms = mono_ms();
		test_fail(__FILE__, __LINE__, "bg_start %s %s: no thread (%s)", method, path,
			  strerror(rc));
	}
	if (restarted)
		test_fail(__FILE__, __LINE__, "bg_start %s %s on a struct bg whose request still "
			  "runs: bg_join it first", method, path);
}

void bg_start(struct bg *b, const char *method, const char *path, const char *body)
{
	bg_start_on(b, H_dlockd.base, method, path, body);
}

void bg_join(struct bg *b)
{
	struct bg_run *run = b->run, **pp;
	bool ours;

	if (!run)
		return;
	pthread_mutex_lock(&bgs.lock);
	ours = run->owner == b;
	pthread_mutex_unlock(&bgs.lock);
	if (!ours)		/* taken back by a failed CHECK: the runner joins it */
		return;
	pthread_join(run->thread, NULL);
	pthread_mutex_lock(&bgs.lock);
	for (pp = &bgs.running; *pp; pp = &(*pp)->next)
		if (*pp == run) {
			*pp = run->next;
			break;
		}
	pthread_mutex_unlock(&bgs.lock);
	b->run = NULL;
	bg_run_free(run);
}

/* Take every running request back from the test and make it give up;
 * returns how many the test still owned. Touches no struct bg: the test's
 * memory may be gone already. */
static int bg_take_back_all(void)
{
	int owned = 0;

	pthread_mutex_lock(&bgs.lock);
	for (struct bg_run *run = bgs.running; run; run = run->next) {
		if (run->owner)
			owned++;
		run->owner = NULL;
		__atomic_store_n(&run->abort, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&bgs.lock);
	return owned;
}

/* Join every request taken back, waiting up to timeout_ms in all (an
 * aborted request gives up within about a second); one that does not end
 * is kept, never freed, so its thread has its own memory to finish in.
 * Returns how many did not end. */
static int bg_join_all(int timeout_ms)
{
	struct timespec until;
	struct bg_run *list, *next;
	int hung = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	pthread_mutex_lock(&bgs.lock);
	list = bgs.running;
	bgs.running = NULL;
	pthread_mutex_unlock(&bgs.lock);
	for (struct bg_run *run = list; run; run = next) {
		next = run->next;
		if (pthread_timedjoin_np(run->thread, NULL, &until) == 0) {
			bg_run_free(run);
			continue;
		}
		printf("# background request %s %s%s did not end when aborted; left running\n",
		       run->method, run->base, run->path);
		pthread_mutex_lock(&bgs.lock);
		run->next = bgs.hung;
		bgs.hung = run;
		pthread_mutex_unlock(&bgs.lock);
		hung++;
	}
	return hung;
}

/* Threads of requests that did not end when aborted and still run. */
static int bg_hung_running(void)
{
	int n = 0;

	pthread_mutex_lock(&bgs.lock);
	for (struct bg_run *run = bgs.hung; run; run = run->next)
		n += !run->done;
	pthread_mutex_unlock(&bgs.lock);
	return n;
}

int raw_connect(int port)
{
	return raw_connect_from(port, INADDR_LOOPBACK);
}

int raw_connect_from(int port, uint32_t from)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in src = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	src.sin_addr.s_addr = htonl(from);
	if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

void raw_reset(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

bool raw_send(int fd, const char *method, const char *path, const char *headers)
{
	char req[2048];
	int len = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
			   "Content-Length: 0\r\n\r\n", method, path, headers ? headers : "");

	return len < (int)sizeof(req) && write(fd, req, (size_t)len) == len;
}

int raw_read(int fd, int timeout_ms, struct raw_answer *a)
{
	struct raw_answer dropped;
	char buf[8192];
	size_t len = 0;
	int64_t until = mono_ms() + timeout_ms;

	if (!a)
		a = &dropped;
	memset(a, 0, sizeof(*a));
	for (;;) {
		char *end = len ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (end) {
			const char *cl = strcasestr(buf, "\r\nContent-Length:");
			const char *id = strcasestr(buf, "\r\nX-Request-Id:");
			size_t head = (size_t)(end + 4 - buf);
			size_t blen = cl ? strtoul(cl + 17, NULL, 10) : 0;

			if (len >= head + blen) {
				if (id && id < end)
					sscanf(id + 15, " %135[^\r]", a->request_id);
				snprintf(a->body, sizeof(a->body), "%.*s", (int)blen, end + 4);
				return a->status = atoi(buf + 9);
			}
		}
		if (len == sizeof(buf) - 1 || mono_ms() >= until ||
		    poll(&p, 1, (int)(until - mono_ms())) <= 0)
			return a->status = 0;
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			return a->status = -1;
		len += (size_t)n;
		buf[len] = '\0';
	}
}


/* ----- Redis client ----- */

redisContext *redis_client(const struct redis_srv *r)
{
	struct timeval tv = { 2, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", (r ? r : &H_redis)->port, tv);

	if (c && c->err) {
		redisFree(c);
		return NULL;
	}
	if (c)
		redisSetTimeout(c, tv);
	return c;
}

/* One connection per thread, freed when the thread exits. */
static pthread_key_t rc_key;
static pthread_once_t rc_once = PTHREAD_ONCE_INIT;

static void rc_key_make(void)
{
	pthread_key_create(&rc_key, (void (*)(void *))redisFree);
}

static redisReply *vrcmd(const char *fmt, va_list ap)
{
	redisContext *c;
	redisReply *r;

	pthread_once(&rc_once, rc_key_make);
	c = pthread_getspecific(rc_key);
	if (!c) {
		c = redis_client(NULL);
		pthread_setspecific(rc_key, c);
	}
	if (!c)
		return NULL;
	r = redisvCommand(c, fmt, ap);
	if (!r) {
		redisFree(c);
		pthread_setspecific(rc_key, NULL);
	}
	return r;
}

redisReply *rcmd(const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = vrcmd(fmt, ap);
	va_end(ap);
	return r;
}

long long rcmd_int(const char *fmt, ...)
{
	va_list ap;
	redisReply *r;
	long long v = -999999;

	va_start(ap, fmt);
	r = vrcmd(fmt, ap);
	va_end(ap);
	if (r && r->type == REDIS_REPLY_INTEGER)
		v = r->integer;
	else if (r && r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	if (r)
		freeReplyObject(r);
	return v;
}

bool redis_reown(const char *name, const char *from, const char *to)
{
	static const char script[] =
		"local lock, owners, permits, from, to = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2] "
		"if redis.call('type', lock).ok == 'hash' then "
		"  local v = redis.call('hget', lock, from) "
		"  if v then redis.call('hset', lock, to, v) redis.call('hdel', lock, from) end "
		"end "
		"for _, p in ipairs({'', '#', '='}) do "
		"  local v = redis.call('hget', owners, p .. from) "
		"  if v then redis.call('hset', owners, p .. to, v) redis.call('hdel', owners, p .. from) end "
		"end "
		"local s = redis.call('zscore', permits, from) "
		"if s then redis.call('zadd', permits, s, to) redis.call('zrem', permits, from) end "
		"if redis.call('exists', KEYS[4]) == 1 then redis.call('rename', KEYS[4], KEYS[5]) end "
		"return 1";
	char owners[300], permits[300], tfrom[400], tto[400];

	snprintf(owners, sizeof(owners), "dlockd_lock_owners:{%s}", name);
	snprintf(permits, sizeof(permits), "{%s}:timeout", name);
	snprintf(tfrom, sizeof(tfrom), "{%s}:%s:rwlock_timeout:1", name, from);
	snprintf(tto, sizeof(tto), "{%s}:%s:rwlock_timeout:1", name, to);
	return rcmd_int("EVAL %s 5 %s %s %s %s %s %s %s", script, name, owners, permits, tfrom, tto,
			from, to) == 1;
}

redisReply *rvcmd_on(const struct redis_srv *r, const char *fmt, va_list ap)
{
	redisContext *c = redis_client(r);
	redisReply *rep;

	if (!c)
		return NULL;
	rep = redisvCommand(c, fmt, ap);
	redisFree(c);
	return rep;
}

bool rcmd_ok_on(const struct redis_srv *r, const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;
	bool ok;

	va_start(ap, fmt);
	rep = rvcmd_on(r, fmt, ap);
	va_end(ap);
	ok = rep && rep->type != REDIS_REPLY_ERROR;
	if (rep)
		freeReplyObject(rep);
	return ok;
}

redisReply *rcmd_on(const struct redis_srv *r, const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = rvcmd_on(r, fmt, ap);
	va_end(ap);
	return rep;
}

long long rcmd_int_on(const struct redis_srv *r, const char *fmt, ...)
{
	redisReply *rep;
	long long v = -999999;
	va_list ap;

	va_start(ap, fmt);
	rep = rvcmd_on(r, fmt, ap);
	va_end(ap);
	if (rep && rep->type == REDIS_REPLY_INTEGER)
		v = rep->integer;
	if (rep)
		freeReplyObject(rep);
	return v;
}

bool file_contains(const char *path, const char *s)
{
	enum { CAP = 1 << 16 };
	char *buf = malloc(CAP);
	FILE *f = fopen(path, "r");
	size_t n = f && buf ? fread(buf, 1, CAP - 1, f) : 0;
	bool found = false;

	if (buf) {
		buf[n] = '\0';
		found = strstr(buf, s) != NULL;
	}
	if (f)
		fclose(f);
	free(buf);
	return found;
}

int file_lines_with(const char *path, ...)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int n = 0;

	while (f && getline(&line, &cap, f) >= 0) {
		bool all = true;
		va_list ap;

		va_start(ap, path);
		for (const char *s = va_arg(ap, const char *); s && all;
		     s = va_arg(ap, const char *))
			all = strstr(line, s) != NULL;
		va_end(ap);
		n += all;
	}
	free(line);
	if (f)
		fclose(f);
	return n;
}

int logged_delivered(const struct dlockd_srv *d, const char *method, const char *owner)
{
	char m[32], needle[64];

	snprintf(m, sizeof(m), "\"method\":\"%s\"", method);
	snprintf(needle, sizeof(needle), "\"owner\":\"%s\",", owner);
	if (!WAIT_FOR(file_lines_with(d->log, m, needle, NULL) == 1, 3000))
		return -1;
	return file_lines_with(d->log, m, needle, "\"delivered\":false", NULL) == 0;
}

const char redisson_acquire[] =
	"if ((redis.call('exists', KEYS[1]) == 0) or "
	"(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
	"redis.call('hincrby', KEYS[1], ARGV[2], 1); "
	"redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
	"return redis.call('pttl', KEYS[1]);";

const char redisson_unlock[] =
	"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
	"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
	"if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
	"else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end; "
	"return nil;";

long long redis_scripts_called(void)
{
	redisReply *r = rcmd("INFO commandstats");
	long long calls = script_calls_of(r && r->type == REDIS_REPLY_STRING ? r->str : NULL, false);

	if (r)
		freeReplyObject(r);
	return calls;
}

bool redis_scripts_quiet(int quiet_ms)
{
	for (int tries = 0; tries < 50; tries++) {
		long long before = redis_scripts_called();

		sleep_ms(quiet_ms);
		if (redis_scripts_called() == before)
			return true;
	}
	return false;
}

/* ----- Runner ----- */

struct test {
	const char *name;
	test_fn fn;
	bool selftest;
};

static struct test tests[1024];
static int ntests;
static int tests_dropped;	/* registered past tests[]: main refuses to run */
static int cur_failed;
static char cur_skipped[300];	/* why the current test was skipped; "" if not */
static const char *cur_name;

void test_register(const char *name, test_fn fn, bool selftest)
{
	if (ntests < (int)(sizeof(tests) / sizeof(tests[0])))
		tests[ntests++] = (struct test){ name, fn, selftest };
	else
		tests_dropped++;
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "# %s: %s:%d: ", cur_name, file, line);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	cur_failed = 1;
	/* A failed CHECK returns next: the test's struct bg go with its
	 * frame, so no request may write into them any more. */
	bg_take_back_all();
}

/* What to run when the current test is over (test_at_end). */
static struct {
	pthread_mutex_t lock;
	struct {
		void (*fn)(void *);
		void *arg;
	} hook[64];
	int n;
} at_end = { .lock = PTHREAD_MUTEX_INITIALIZER };

void test_at_end(void (*fn)(void *), void *arg)
{
	bool full;

	pthread_mutex_lock(&at_end.lock);
	full = at_end.n == (int)(sizeof(at_end.hook) / sizeof(at_end.hook[0]));
	if (!full) {
		at_end.hook[at_end.n].fn = fn;
		at_end.hook[at_end.n++].arg = arg;
	}
	pthread_mutex_unlock(&at_end.lock);
	if (full)
		test_fail(__FILE__, __LINE__, "more than %d test_at_end hooks",
			  (int)(sizeof(at_end.hook) / sizeof(at_end.hook[0])));
}

void test_at_end_cancel(void *arg)
{
	pthread_mutex_lock(&at_end.lock);
	for (int i = at_end.n - 1; i >= 0; i--)
		if (at_end.hook[i].arg == arg) {
			memmove(&at_end.hook[i], &at_end.hook[i + 1],
				(size_t)(at_end.n - i - 1) * sizeof(at_end.hook[0]));
			at_end.n--;
			break;
		}
	pthread_mutex_unlock(&at_end.lock);
}

/* Run the hooks still registered, last first (a hook may register or
 * cancel others). */
static void run_at_end(void)
{
	for (;;) {
		void (*fn)(void *) = NULL;
		void *arg = NULL;

		pthread_mutex_lock(&at_end.lock);
		if (at_end.n > 0) {
			at_end.n--;
			fn = at_end.hook[at_end.n].fn;
			arg = at_end.hook[at_end.n].arg;
		}
		pthread_mutex_unlock(&at_end.lock);
		if (!fn)
			break;
		fn(arg);
	}
}

bool test_failed(void)
{
	return cur_failed;
}

void test_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cur_skipped, sizeof(cur_skipped), fmt, ap);
	va_end(ap);
	if (!cur_skipped[0])
		snprintf(cur_skipped, sizeof(cur_skipped), "(no reason given)");
}

const char *lockname(const char *hint)
{
	static __thread char buf[8][128];
	static __thread int k;
	static int counter;
	char *out = buf[k++ % 8];

	snprintf(out, 128, "t%d-%s-%s-%d", (int)getpid(), cur_name, hint,
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	return out;
}

/* Threads of this process now, but for those of background requests that
 * did not end when aborted (bgs.hung): the runner's and the test's. */
static int test_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - bg_hung_running();
}

/* End what the test left running, which it does when a failed CHECK
 * returns early, before the next test starts: its background requests
 * (taken back and aborted at once; joined once its processes are gone, as
 * a request to them then ends too), its test_at_end hooks, the processes
 * it started. Then no thread of it may be left: one could write into the
 * stack of a later test (its own threads are the test's to join before
 * any CHECK can return). Returns false if one is, and the run must stop. */
static bool end_test(int threads_before)
{
	int owned = bg_take_back_all(), strays, hung;

	run_at_end();
	strays = stop_strays();
	hung = bg_join_all(10000 * slow_factor());
	if (owned && !cur_failed)
		test_fail(__FILE__, __LINE__, "left %d background request(s) running (aborted "
			  "now): bg_join what you bg_start", owned);
	if (strays && !cur_failed)
		test_fail(__FILE__, __LINE__, "left processes running (stopped now)");
	if (hung)
		test_fail(__FILE__, __LINE__, "%d background request(s) did not end when aborted",
			  hung);
	if (!WAIT_FOR(test_threads() <= threads_before, 5000)) {
		test_fail(__FILE__, __LINE__, "left %d thread(s) running: join every thread a test "
			  "starts before a CHECK can return", test_threads() - threads_before);
		return false;
	}
	return true;
}

static void cleanup(void)
{
	redisContext *c;

	pthread_once(&rc_once, rc_key_make);
	c = pthread_getspecific(rc_key);
	if (c) {
		redisFree(c);
		pthread_setspecific(rc_key, NULL);
	}
	if (H_dlockd.pid > 0)
		dlockd_stop(&H_dlockd, 5000);
	redis_stop(&H_redis, false);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0, n = 0;
	const char *bin = getenv("DLOCKD_BIN");
	const char *keep = getenv("DLOCKD_KEEP_TMP");
	const char *self = getenv("DLOCKD_SELFTEST");
	bool selftests = self && *self == '1';

	if (tests_dropped) {	/* never skip tests silently */
		fprintf(stderr, "# %d tests more than tests[] holds: make it larger\n",
			tests_dropped);
		return 2;
	}
	if (bin)
		dlockd_bin = bin;
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dlockd-test.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (redis_start(&H_redis) < 0 || dlockd_start(&H_dlockd, NULL, NULL) < 0)
		return 2;
	printf("# redis on %d, dlockd on %d (pid %d), logs in %s\n", H_redis.port, H_dlockd.port,
	       (int)H_dlockd.pid, tmpdir);
	for (int i = 0; i < ntests; i++) {
		int64_t t0;
		int threads;
		bool selected = argc < 2, clean;

		if (tests[i].selftest != selftests)
			continue;
		for (int a = 1; a < argc; a++)
			if (strstr(tests[i].name, argv[a]))
				selected = true;
		if (!selected)
			continue;
		cur_name = tests[i].name;
		cur_failed = 0;
		cur_skipped[0] = '\0';
		threads = test_threads();
		t0 = mono_ms();
		http_tls(NULL);
		tests[i].fn();
		n++;
		clean = end_test(threads);
		if (cur_failed)
			failed++;
		else if (cur_skipped[0])
			skipped++;
		else
			passed++;
		if (cur_skipped[0] && !cur_failed)
			printf("ok %d - %s # SKIP %s\n", n, tests[i].name, cur_skipped);
		else
			printf("%s %d - %s (%lld ms)\n", cur_failed ? "not ok" : "ok", n,
			       tests[i].name, (long long)(mono_ms() - t0));
		if (!clean) {
			printf("Bail out! %s left threads running; later tests could not be "
			       "trusted\n", tests[i].name);
			fflush(stdout);
			return 1;
		}
		fflush(stdout);
	}
	{
		int rc = dlockd_stop(&H_dlockd, 5000);

		if (rc != 0) {
			printf("not ok %d - shared dlockd exits cleanly on SIGTERM (status %d; see %s)\n",
			       ++n, rc, H_dlockd.log);
			failed++;
		}
	}
	redis_stop(&H_redis, false);
	printf("integration: %d passed, %d failed", passed, failed);
	if (skipped)
		printf(", %d skipped", skipped);
	printf("\n");
	if (!failed && !(keep && *keep)) {
		char cmd[200];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "# could not remove %s\n", tmpdir);
	}
	curl_global_cleanup();
	return failed ? 1 : 0;
}

/* Every lock GET /locks?<query> lists on d (with token, NULL: none),
 * paging limit at a time: {name: entry}. *pages counts the pages,
 * *dups the names listed more than once; NULL (after a failed CHECK's
 * message in why) when a page is not 200 or lacks what it must have. */
json_t *list_locks_all(const struct dlockd_srv *d, const char *token, const char *query,
			int limit, int *pages, int *dups, char *why, size_t why_len)
{
	json_t *all = json_object();
	char cursor[400] = "", path[1200];

	*pages = *dups = 0;
	for (;;) {
		struct http_resp r;
		json_t *locks, *e, *next;
		size_t i;

		snprintf(path, sizeof(path), "/locks?%s&limit=%d%s%s", query, limit,
			 cursor[0] ? "&cursor=" : "", cursor);
		http_bearer(token);
		http_on(d ? d->base : H_dlockd.base, "GET", path, NULL, &r);
		http_bearer(NULL);
		(*pages)++;
		locks = r.json ? json_object_get(r.json, "locks") : NULL;
		if (r.status != 200 || !json_is_array(locks) || json_array_size(locks) > (size_t)limit ||
		    *pages > 5000) {
			snprintf(why, why_len, "page %d of %.300s: %ld %.200s", *pages, path, r.status,
				 r.body ? r.body : "");
			http_free(&r);
			json_decref(all);
			return NULL;
		}
		json_array_foreach(locks, i, e) {
			const char *name = json_string_value(json_object_get(e, "name"));

			if (!name)
				continue;
			if (json_object_get(all, name))
				(*dups)++;
			json_object_set(all, name, e);
		}
		next = json_object_get(r.json, "cursor");
		if (!next) {
			http_free(&r);
			return all;
		}
		/* opaque, but made of URL-safe characters: pass it back as it is */
		snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
		http_free(&r);
	}
}

/* The holder of entry e with this owner (and mode, for rwlocks), or NULL. */

long long redis_names_left(redisContext *c, const char *prefix)
{
	redisReply *r;
	char pattern[200];
	long long n = -1;

	if (!c)
		return -1;
	snprintf(pattern, sizeof(pattern), "*%s*", prefix);
	r = redisCommand(c, "EVAL %s 0 %s",
			 "local n, cur = 0, '0' repeat local r = redis.call('scan', cur, "
			 "'match', ARGV[1], 'count', 1000) cur = r[1] n = n + #r[2] "
			 "until cur == '0' return n", pattern);
	if (r && r->type == REDIS_REPLY_INTEGER)
		n = r->integer;
	if (r)
		freeReplyObject(r);
	r = redisCommand(c, "PUBSUB CHANNELS %s", pattern);
	if (r && r->type == REDIS_REPLY_ARRAY && n >= 0)
		n += (long long)r->elements;
	if (r)
		freeReplyObject(r);
	redisFree(c);
	return n;
}
