/* harness.h -- integration-test harness: real redis-server and dlockd
 * processes on free loopback ports, an HTTP client (libcurl), a Redis
 * client (hiredis) and a tiny test runner. */
#ifndef DLOCKD_HARNESS_H
#define DLOCKD_HARNESS_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ----- Processes ----- */

struct redis_srv {
	int port;
	pid_t pid;
	char dir[256];
	char extra[256];	/* extra redis-server arguments, space separated */
};

struct dlockd_srv {
	int port;
	pid_t pid;
	char redis_url[128];
	char log[300];
	char base[64];		/* "http://127.0.0.1:PORT" */
};

int free_port(void);
/* The run's private directory (removed at the end when all passed). */
const char *test_tmpdir(void);
/* Start redis-server on r->port (0 picks a free one); waits for PING. */
int redis_start(struct redis_srv *r);
/* SIGKILL (hard) or SIGTERM it and reap it. */
void redis_stop(struct redis_srv *r, bool hard);
/* Start dlockd against redis_url (NULL: the shared Redis) with extra flags
 * (NULL-terminated); waits until /healthz answers. */
int dlockd_start(struct dlockd_srv *d, const char *redis_url, const char *const *flags);
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

/* ----- Clients ----- */

struct http_resp {
	long status;
	char *body;
	json_t *json;		/* parsed body, or NULL */
	char retry_after[32];
	char allow[64];
	char content_type[64];
	double ms;		/* wall time of the request */
};

/* method url-path (on H_dlockd unless base is given) with an optional body;
 * returns 0 when a response came back. Frees nothing of the previous r:
 * call http_free. */
int http_on(const char *base, const char *method, const char *path, const char *body,
	    struct http_resp *r);
int http(const char *method, const char *path, const char *body, struct http_resp *r);
/* Send "Authorization: Bearer <token>" on this thread's later requests
 * (NULL: none). */
void http_bearer(const char *token);
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

/* A new hiredis connection to r (NULL: the shared Redis). */
redisContext *redis_client(const struct redis_srv *r);
/* Run a command on the shared Redis; returns the reply (free it). */
redisReply *rcmd(const char *fmt, ...);
long long rcmd_int(const char *fmt, ...);
/* The integer reply of a command on r, on a connection of its own;
 * -999999 when there is none (no connection, an error, another type). */
long long rcmd_int_on(const struct redis_srv *r, const char *fmt, ...);
/* Does the file at path (its first 64 KiB) contain s? */
bool file_contains(const char *path, const char *s);
/* Redisson's own RLock scripts, as a Java client runs them:
 * acquire  KEYS[1] lock, ARGV[1] lease ms, ARGV[2] field: nil when
 *          acquired, else the PTTL;
 * unlock   KEYS[1] lock, KEYS[2] channel, ARGV[1] message, ARGV[2] lease
 *          ms, ARGV[3] field, ARGV[4] publish command: 1 freed, 0 still
 *          held, nil not held. */
extern const char redisson_acquire[], redisson_unlock[];

/* Calls of EVALSHA so far on the shared Redis (INFO commandstats). */
long long redis_evalsha_calls(void);

/* dlockd's /metrics value of the series name (labels included, exactly as
 * rendered); 0 when the series is not listed, -1 when /metrics failed. */
double metric_value(const struct dlockd_srv *d, const char *name);

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
/* Run fn(arg) when the current test is over, if test_at_end_cancel(arg) was
 * not called before: for what a test (or harness code, like checker.c's
 * load) starts and must end even when a failed CHECK returns early. The
 * runner calls these (last registered first) once the test has returned,
 * so arg must outlive the test: static or heap, never the test's stack. */
void test_at_end(void (*fn)(void *), void *arg);
void test_at_end_cancel(void *arg);
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

/* Wait (bounded) for cond to hold, polling every 10 ms. */
#define WAIT_FOR(cond, timeout_ms) \
	({ int64_t until_ = mono_ms() + (int64_t)(timeout_ms) * slow_factor(); \
	   bool ok_; while (!(ok_ = (cond)) && mono_ms() < until_) sleep_ms(10); ok_; })

#endif
