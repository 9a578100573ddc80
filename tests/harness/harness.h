/* harness.h -- integration-test harness: real redis-server and dlockd
 * processes on free loopback ports, an HTTP client (libcurl), a Redis
 * client (hiredis) and a tiny test runner.
 *
 * Writing a test. Put TEST(name) { ... } in a tests/integration/ file (a new
 * file is picked up by the Makefile) and run it alone with
 * `DLOCKD_BIN=build/dlockd build/tests/dlockd_integration name`. Tests run
 * one after another against the shared H_redis and H_dlockd; start your own
 * (redis_start, dlockd_start; both at once: redis_dlockd_start) only for
 * what must not touch those. Then:
 *   - a fresh name per lock: lockname("hint");
 *   - requests: req() or status_of() when the status is all you need,
 *     http()/http_on() for the body; lock_hold()/lock_release() for a plain
 *     lock; flag_of(d, "locked", "/locks/%s", n) for a status field;
 *   - check with CHECK, CHECK_STATUS, CHECK_ERROR; a request that waits
 *     runs in the background: bg_start, then bg_join (never leave one);
 *   - never sleep_ms() to get past a race: wait for what you need with
 *     WAIT_FOR(cond, ms), or the ready-made waits: wait_waiters() (dlockd
 *     counts N waiting requests), wait_no_waiters(), channel_subscribers(),
 *     and before a release whose wake-up you time, wait_parked(): they
 *     also subscribed and made the post-subscribe retry they owed, so only the
 *     release message can wake them now (s0 = redis_scripts_called();
 *     bg_start(...); CHECK(wait_parked(NULL, 1, s0, 5000,
 *     "redisson_lock__channel:{%s}", n), ...));
 *   - "granted within N ms of the release": take t = mono_ms() right
 *     after the release, then CHECK_GRANTED_WITHIN(b, t, N, "what");
 *   - timeouts generous (a loaded 2-core machine; WAIT_FOR and the helpers
 *     stretch them by slow_factor(), multiply your own timing bounds by it);
 *   - only loopback (or addresses inside network namespaces the test
 *     made itself: netns.h), only processes the test started, by pid; sleep_ms()
 *     only where the wait itself is under test (a lease running out, a
 *     stall), with a comment saying so;
 *   - test through HTTP, /metrics and Redis only, never dlockd's insides. */
#ifndef DLOCKD_HARNESS_H
#define DLOCKD_HARNESS_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ----- Processes ----- */

struct redis_srv {
	int port;
	pid_t pid;
	char dir[256];
	char extra[256];	/* extra redis-server arguments, space separated */
	char conf[300];		/* a config file to start with (a sentinel's), or "" */
	/* TLS (certificates of pki_ready(): node.pem, CA ca.pem, clients not
	 * asked for one unless extra says --tls-auth-clients yes): tls_only
	 * serves TLS on port and nothing else (--port 0); tls_port (-1: a
	 * free one, set on start) serves it there besides plaintext on port */
	bool tls_only;
	int tls_port;
};

struct dlockd_srv {
	int port;
	pid_t pid;
	char redis_url[128];
	char log[300];
	char host[48];		/* listens and is reached there: 127.0.0.1 unless
				 * dlockd_start_at said otherwise */
	char base[64];		/* "http://HOST:PORT", https:// with --tls-cert */
};

int free_port(void);
/* The run's private directory (removed at the end when all passed). */
const char *test_tmpdir(void);
/* Start redis-server on r->port (0 picks a free one); waits for PING. */
int redis_start(struct redis_srv *r);
/* SIGKILL (hard) or SIGTERM it and reap it. */
void redis_stop(struct redis_srv *r, bool hard);
/* redis-cli over TLS (trusting ca.pem, presenting client.pem) to r's TLS
 * port with args (shell words); its output into out (cap bytes, lines
 * joined by spaces, "" if none). Returns redis-cli's exit status (-1:
 * not run). */
int redis_tls_cli(const struct redis_srv *r, const char *args, char *out, size_t cap);
/* Start dlockd against redis_url (NULL: the shared Redis) with extra flags
 * (NULL-terminated); waits until /healthz answers. With --tls-cert in
 * flags, d->base is https:// and the wait speaks TLS as http_tls() said. */
int dlockd_start(struct dlockd_srv *d, const char *redis_url, const char *const *flags);
/* The same listening on host (an IPv4 address) instead of 127.0.0.1:
 * another address of the calling thread's network namespace (netns.h). */
int dlockd_start_at(struct dlockd_srv *d, const char *host, const char *redis_url,
		    const char *const *flags);
/* The same against a private Redis of the test's (database 0). */
int dlockd_start_on(struct dlockd_srv *d, const struct redis_srv *rs, const char *const *flags);
/* A private redis-server (rs as the test set it up: port, extra, ...) and
 * a dlockd on it (dlockd_start_on), for a test that stops, stalls or
 * restarts its Redis: 0, or -1 when either did not start (the harness
 * said which on stderr). */
int redis_dlockd_start(struct redis_srv *rs, struct dlockd_srv *d, const char *const *flags);
/* Stop both: d as dlockd_stop (its exit status, waiting up to
 * timeout_ms), then rs with SIGTERM. */
int redis_dlockd_stop(struct redis_srv *rs, struct dlockd_srv *d, int timeout_ms);
/* Start d on the shared Redis with --auth-file, a file named name in the
 * run's directory holding tokens (the file's text). -1 if the file could
 * not be written or dlockd did not start. */
int dlockd_start_auth(struct dlockd_srv *d, const char *name, const char *tokens);
/* Start it again on the same port and Redis, after a stop or kill; the
 * log goes on in the same file. */
int dlockd_restart(struct dlockd_srv *d, const char *const *flags);
/* SIGKILL it and reap it. */
void dlockd_kill(struct dlockd_srv *d);
/* Which dlockd binary later dlockd_start() calls run (the build's by
 * default); returns the one used until now. */
const char *dlockd_use_bin(const char *bin);
/* The dlockd binary under test ($DLOCKD_BIN, or build/dlockd). */
const char *dlockd_binary(void);
/* SIGTERM and wait up to timeout_ms; returns the exit status, or -1 if it
 * had to be killed. */
int dlockd_stop(struct dlockd_srv *d, int timeout_ms);
int proc_threads(pid_t pid);
long proc_rss_kib(pid_t pid);

/* The suite's shared Redis and dlockd. */
extern struct redis_srv H_redis;
extern struct dlockd_srv H_dlockd;

/* ----- A test's own child processes (a client program under test) ----- */

struct proc {
	pid_t pid;		/* also its process group */
	char out[400];		/* the file its stdout goes to */
	char err[400];		/* ... and its stderr */
	int status;		/* its wait status, once reaped */
	bool reaped;
};

/* Start argv (found on $PATH) in a process group of its own, stdout and
 * stderr to files named after tag in the run's directory, with env
 * ("NAME=value" strings, NULL-terminated; NULL: none) added to the
 * environment. One still running when the test ends is SIGKILLed. */
void proc_start(struct proc *p, const char *const argv[], const char *const env[],
		const char *tag);
/* Has it exited (reaping it if so)? */
bool proc_exited(struct proc *p);
/* Exited with status code? */
bool proc_exit_code(struct proc *p, int code);
/* SIGKILL its process group if it still runs, and reap it. */
void proc_kill(struct proc *p);
/* The start of the file at path (up to cap-1 bytes) in buf; "" if none. */
const char *file_read(const char *path, char *buf, size_t cap);
/* Run with sh, as it is written, the first ```sh block after the line
 * marker (a docs marker, e.g. "<!-- run-by: FILE TEST -->") of the doc at
 * path (relative to the source tree), with DLOCKD=<H_dlockd's base> in
 * its environment; its stdout (and, when it fails, its stderr) into out.
 * Its exit code; -1 when there is no such block, -2 when it did not end
 * within timeout_ms. */
int doc_sh_run(const char *path, const char *marker, int timeout_ms, char *out, size_t cap);
/* POST /sessions?ttl_ms= on base (NULL: H_dlockd): the new session's id
 * into id (33 bytes); false when it was not made. */
bool session_start_on(const char *base, int ttl_ms, char *id);

/* ----- Clients ----- */

struct http_resp {
	long status;
	char *body;
	json_t *json;		/* parsed body, or NULL */
	char retry_after[32];
	char allow[64];
	char content_type[64];
	char request_id[136];	/* X-Request-Id */
	double ms;		/* wall time of the request */
	/* over TLS, on a connection made for this request: the server
	 * certificate's subject ("CN = x"); "" otherwise */
	char peer_subject[256];
};

/* method url-path (on H_dlockd unless base is given) with an optional body;
 * returns 0 when a response came back. Frees nothing of the previous r:
 * call http_free. */
int http_on(const char *base, const char *method, const char *path, const char *body,
	    struct http_resp *r);
int http(const char *method, const char *path, const char *body, struct http_resp *r);
/* Send "Authorization: Bearer <token>" on this thread's later requests
 * (NULL: none), and on the background requests it starts later (bg_start
 * keeps the pointer: token must outlive them). */
void http_bearer(const char *token);
/* Send header ("Name: value") on this thread's later requests besides
 * (NULL: none). */
void http_extra_header(const char *header);
/* This thread's requests give up (status -1, like a lost connection)
 * within about a second once *flag is non-zero; NULL: never. For client
 * threads a test stops while their requests hang (a cut network). */
void http_abort_when(const int *flag);
/* How this thread's later requests to https:// bases speak TLS (and the
 * background requests it starts later: bg_start copies it). Files are
 * PEM paths, copied. The runner sets none (NULL) before each test. */
struct http_tls {
	const char *ca;		/* trust only this CA; NULL: do not verify the server */
	const char *cert, *key;	/* the client certificate and its key; NULL: none */
	bool fresh;		/* a new connection per request (a new handshake) */
};
void http_tls(const struct http_tls *t);
void http_free(struct http_resp *r);
/* method path on H_dlockd with no body; returns the status (0: no
 * answer). With out, the response is handed over (http_free it), else
 * freed. */
long req(const char *method, const char *path, struct http_resp *out);
const char *json_str(const struct http_resp *r, const char *key);
long long json_int(const struct http_resp *r, const char *key);
int json_bool(const struct http_resp *r, const char *key);	/* -1 if absent */

/* A plain TCP connection to 127.0.0.1:port, for requests curl cannot make
 * (a client that hangs up mid-request); -1 on failure. */
int raw_connect(int port);
/* The same from loopback address from (host order: 0x7f000002 is
 * 127.0.0.2, another client to dlockd). */
int raw_connect_from(int port, uint32_t from);
/* One answer read off a raw connection (raw_read). */
struct raw_answer {
	int status;		/* 0: none in time, -1: connection ended */
	char request_id[136];	/* its X-Request-Id, "" if none */
	char body[4096];
};
/* Send method path on fd with extra header lines (each ending "\r\n", or
 * NULL) and no body; false if it could not be written. */
bool raw_send(int fd, const char *method, const char *path, const char *headers);
/* Read the next whole answer on fd within timeout_ms into a (NULL: read
 * and dropped); its status (a->status too). */
int raw_read(int fd, int timeout_ms, struct raw_answer *a);
/* Close fd with a reset (SO_LINGER 0): a write to it fails at once, where
 * after a plain close (FIN) the kernel takes one and the server cannot
 * tell. */
void raw_reset(int fd);

/* A new hiredis connection to r (NULL: the shared Redis). */
redisContext *redis_client(const struct redis_srv *r);
/* Run a command on the shared Redis; returns the reply (free it). */
redisReply *rcmd(const char *fmt, ...);
long long rcmd_int(const char *fmt, ...);
/* In the shared Redis, make owner from's holding of name (of any kind:
 * its field, holders' entry, permit and read timeout key) owner to's; true
 * when done. It makes what the API refuses to: a holding a live session's
 * id has outside the session, which only a failure (or a hand in Redis)
 * can leave. */
bool redis_reown(const char *name, const char *from, const char *to);
/* The integer reply of a command on r, on a connection of its own;
 * -999999 when there is none (no connection, an error, another type). */
long long rcmd_int_on(const struct redis_srv *r, const char *fmt, ...);
/* The reply of a command on r, on a connection of its own (the caller
 * frees it); NULL when there is none. */
redisReply *rcmd_on(const struct redis_srv *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
redisReply *rvcmd_on(const struct redis_srv *r, const char *fmt, va_list ap);
/* A command on r; true when its reply is not an error. */
bool rcmd_ok_on(const struct redis_srv *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Keys and pub/sub channels whose name contains prefix, on the Redis c
 * talks to (c is freed); -1 if c is NULL or Redis did not say. */
long long redis_names_left(redisContext *c, const char *prefix);
/* Does the file at path (its first 64 KiB) contain s? */
bool file_contains(const char *path, const char *s);
/* How many lines of the file at path (all of it; a dlockd's log: d->log)
 * contain every one of the strings given, NULL-terminated. */
int file_lines_with(const char *path, ...) __attribute__((sentinel));
/* Did d log the request (method) of owner as answered and delivered (its
 * access line without "delivered":false)? 1 yes, 0 not delivered, -1 no
 * line within 3 s. */
int logged_delivered(const struct dlockd_srv *d, const char *method, const char *owner);
/* Redisson's own RLock scripts, as a Java client runs them:
 * acquire  KEYS[1] lock, ARGV[1] lease ms, ARGV[2] field: nil when
 *          acquired, else the PTTL;
 * unlock   KEYS[1] lock, KEYS[2] channel, ARGV[1] message, ARGV[2] lease
 *          ms, ARGV[3] field, ARGV[4] publish command: 1 freed, 0 still
 *          held, nil not held. */
extern const char redisson_acquire[], redisson_unlock[];

/* dlockd's script calls so far on the shared Redis (INFO commandstats):
 * FCALL, and EVALSHA where Redis has no functions (a script's first call
 * on a new dlockd, EVAL, not counted). */
long long redis_scripts_called(void);
/* Wait (up to 50 tries) until the shared Redis runs no script (FCALL, EVALSHA) for
 * quiet_ms: the reads a crowd of requests starts with are all in. */
bool redis_scripts_quiet(int quiet_ms);

/* dlockd's /metrics value of the series name (labels included, exactly as
 * rendered); 0 when the series is not listed, -1 when /metrics failed. */
double metric_value(const struct dlockd_srv *d, const char *name);

/* ----- Helpers for lock tests ----- */

/* In these, d NULL means the shared H_dlockd, and paths are printf formats. */

/* method on the path, no body; the status (0: no answer). */
long status_of(const struct dlockd_srv *d, const char *method, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* GET the path and return its boolean field key ("locked", "held"): 1, 0,
 * or -1 (no 200, no such field). */
int flag_of(const struct dlockd_srv *d, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* PUT /locks/name?owner=owner&ttl_ms=ttl_ms: granted (200)? Prints the
 * answer otherwise; CHECK the result. */
bool lock_hold(const struct dlockd_srv *d, const char *name, const char *owner, int ttl_ms);
/* DELETE /locks/name?owner=owner; the status. */
long lock_release(const struct dlockd_srv *d, const char *name, const char *owner);
/* dlockd_waiters of d: requests waiting now (-1: /metrics failed). */
double waiters_of(const struct dlockd_srv *d);
/* Wait (WAIT_FOR) until d counts at least n waiters / none at all. */
bool wait_waiters(const struct dlockd_srv *d, int n, int timeout_ms);
bool wait_no_waiters(const struct dlockd_srv *d, int timeout_ms);
/* Subscribers of the channel on rs (NULL: the shared Redis) by PUBSUB
 * NUMSUB; -1 if Redis did not say. */
long long channel_subscribers(const struct redis_srv *rs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Subscribers of chan on s by PUBSUB SHARDNUMSUB (sharded) or PUBSUB
 * NUMSUB; -1 if Redis did not say. */
long long redis_subscribers(const struct redis_srv *s, bool sharded, const char *chan);
/* Is cmd (a SLOWLOG entry's first word) a script call: FCALL, EVALSHA or
 * EVAL? */
bool is_script_command(const char *cmd);
/* Script calls (FCALL, EVALSHA, and EVAL too with with_eval) that INFO
 * commandstats text info counts; 0 for NULL. */
long long script_calls_of(const char *info, bool with_eval);
/* A figure of command cmd ("fcall") in INFO commandstats of rs (NULL:
 * the shared Redis): field "calls", "failed_calls" or "rejected_calls";
 * 0 when Redis counts none. */
long long redis_cmdstat(const struct redis_srv *rs, const char *cmd, const char *field);
/* Commands rs has run (a private Redis: nothing else runs on it), those
 * inside scripts and the script calls, all but INFO and CONFIG (the
 * count's own), by INFO commandstats since its last CONFIG RESETSTAT. */
long long redis_commands_run(const struct redis_srv *rs);
/* Redis' clock (TIME) in ms on rs (NULL: the shared Redis); 0 if it did
 * not answer. */
long long redis_time_ms(const struct redis_srv *rs);
/* Scripts s has run (FCALL, EVALSHA and EVAL calls, INFO commandstats). */
long long redis_script_calls(const struct redis_srv *s);
/* wait_parked for one waiting acquire on a Redis of the test's (a
 * cluster's node): started on d after scripts0 = redis_script_calls(node),
 * it is parked once d counts a waiter, chan has a subscriber on sub
 * (sharded or not), and node ran its first try and the retry it may owe
 * (as wait_parked). */
bool wait_parked_on(const struct dlockd_srv *d, const struct redis_srv *node, long long scripts0,
		    const struct redis_srv *sub, bool sharded, const char *chan);
/* Wait until the n waiting acquires started on d after
 * scripts0 = redis_scripts_called() are parked: d counts n waiters or more,
 * the shared Redis ran each waiter's first try since scripts0 and the
 * retry it may owe (one that joined a channel not yet live tries again
 * once it is: 2n scripts when all did; else the scripts go quiet), and
 * the channel chan_fmt (NULL: not checked; e.g.
 * "redisson_lock__channel:{%s}") has a subscriber. From then on only a
 * release message, a lease end or the deadline wakes them. */
bool wait_parked(const struct dlockd_srv *d, int n, long long scripts0, int timeout_ms,
		 const char *chan_fmt, ...) __attribute__((format(printf, 5, 6)));

/* Every lock GET /locks?<query> lists on d (NULL: H_dlockd; with token,
 * NULL: none), paging limit at a time: {name: entry}. *pages counts the
 * pages, *dups the names listed more than once; NULL (with why) when a
 * page is not 200 or lacks what it must have. */
json_t *list_locks_all(const struct dlockd_srv *d, const char *token, const char *query,
		       int limit, int *pages, int *dups, char *why, size_t why_len);

/* A request run on its own thread, for waits that block. Start it, read
 * done_ms while it runs if you like, bg_join it, read r, http_free(&b->r).
 *
 * The harness owns the request, not the test: the thread keeps its own
 * copy of what to send and of the answer, and hands the answer to the
 * test's struct bg (r, then done_ms) only while the test still owns that.
 * A failed CHECK (test_fail()) takes every running request back from the
 * test before the CHECK returns, so a struct bg on the test's stack is
 * never written after the test's frame is gone; the runner then ends (and
 * joins) every request a test left running before the next test starts. */
struct bg {
	struct http_resp r;	/* the answer; status -1 if none came */
	int64_t done_ms;	/* mono_ms() when the answer arrived; 0 until then */
	struct bg_run *run;	/* the harness's, while it runs */
};
void bg_start(struct bg *b, const char *method, const char *path, const char *body);
void bg_start_on(struct bg *b, const char *base, const char *method, const char *path,
		 const char *body);
/* Wait for it; the caller http_free()s b->r. Returns at once for a request
 * a failed CHECK took back (b->r is then as bg_start left it, or the
 * answer if it had come). */
void bg_join(struct bg *b);

/* ----- Runner ----- */

typedef void (*test_fn)(void);
/* A selftest runs only when DLOCKD_SELFTEST=1, and then only selftests run
 * (tests of the harness that fail on purpose; see test_harness.c). */
void test_register(const char *name, test_fn fn, bool selftest);
void test_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
bool test_failed(void);
/* Skip the current test (return right after): TAP "ok N - name # SKIP
 * why", counted as skipped, never as passed. */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run fn(arg) when the current test is over, if test_at_end_cancel(arg) was
 * not called before: for what a test (or harness code, like checker.c's
 * load) starts and must end even when a failed CHECK returns early. The
 * runner calls these (last registered first) once the test has returned,
 * so arg must outlive the test: static or heap, never the test's stack. */
void test_at_end(void (*fn)(void *), void *arg);
void test_at_end_cancel(void *arg);

/* ----- Certificates (pki.c) ----- */

/* Make the run's test certificates once (openssl, in test_tmpdir()/pki):
 * ca, other-ca; server1..5 (IP 127.0.0.1, DNS localhost; serverAuth),
 * client (clientAuth), node (both: a Redis replicating over TLS), all
 * signed by ca; self (a self-signed client); elsewhere (signed by ca,
 * named only elsewhere.invalid). Each as NAME.pem and NAME.key. */
bool pki_ready(void);
/* The directory they are in, and the path of one file of it ("ca.pem"):
 * the same string for the same file, for the whole run. */
const char *pki_dir(void);
const char *pki_path(const char *file);
/* Start d on HTTPS with the certificate pki made for server ("server1",
 * "node"), requiring client certificates of the pki CA; this thread's
 * requests then trust that CA and show the pki "client" certificate. -1
 * if the certificates or dlockd could not be had. */
int dlockd_start_mtls(struct dlockd_srv *d, const char *server);

/* A lock name unique to this run and this call. */
const char *lockname(const char *hint);
int64_t mono_ms(void);
void sleep_ms(int ms);
/* DLOCKD_CHAOS=full (make chaos): fault and abuse tests at full length. */
bool chaos_full(void);
/* Slow environments (valgrind) stretch every timeout by this factor. */
int slow_factor(void);

#define TEST(name) \
	static void name(void); \
	__attribute__((constructor)) static void reg_##name(void) { test_register(#name, name, false); } \
	static void name(void)
#define SELFTEST(name) \
	static void name(void); \
	__attribute__((constructor)) static void reg_##name(void) { test_register(#name, name, true); } \
	static void name(void)

#define CHECK(cond, ...) \
	do { if (!(cond)) { test_fail(__FILE__, __LINE__, __VA_ARGS__); return; } } while (0)
#define CHECK_STATUS(r, want, what) \
	CHECK((r).status == (want), "%s: status %ld, want %d; body %s", what, (r).status, want, \
	      (r).body ? (r).body : "(none)")
#define CHECK_ERROR(r, want_status, want_code, what) \
	do { CHECK_STATUS(r, want_status, what); \
	     CHECK(json_str(&(r), "error") && !strcmp(json_str(&(r), "error"), want_code), \
		   "%s: error %s, want %s", what, json_str(&(r), "error"), want_code); \
	     CHECK(json_str(&(r), "message") && *json_str(&(r), "message"), \
		   "%s: no message", what); } while (0)

/* Join b, a waiting acquire, and check that it was granted (200) less
 * than ms (stretched by slow_factor()) after since: a mono_ms() taken
 * right after the release that should wake it. b.r is left to read and
 * http_free. */
#define CHECK_GRANTED_WITHIN(b, since, ms, what) \
	do { bg_join(&(b)); CHECK_STATUS((b).r, 200, what); \
	     CHECK((b).done_ms - (since) < (int64_t)(ms) * slow_factor(), \
		   "%s: granted %lld ms after the release; want < %d", what, \
		   (long long)((b).done_ms - (since)), (int)(ms)); } while (0)

/* Wait (bounded) for cond to hold, polling every 10 ms. */
#define WAIT_FOR(cond, timeout_ms) \
	({ int64_t until_ = mono_ms() + (int64_t)(timeout_ms) * slow_factor(); \
	   bool ok_; while (!(ok_ = (cond)) && mono_ms() < until_) sleep_ms(10); ok_; })

#endif
