/* test_process.c -- the dlockd process: --help, --version, bad flags,
 * configured limits, and SIGTERM with requests waiting (each answered 503,
 * exit 0 within a couple of seconds). */
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_capture(const char *cmd, char *out, size_t cap)
{
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	int st;

	if (!f)
		return -1;
	while (n + 1 < cap && !feof(f))
		n += fread(out + n, 1, cap - n - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(help_lists_every_setting)
{
	static const char *const want[] = {
		"--listen", "--redis", "--threads", "--default-ttl-ms", "--max-ttl-ms",
		"--max-wait-ms", "--max-body-bytes", "--log-level", "DLOCKD_LISTEN",
		"DLOCKD_REDIS_URL", "unix://", "redis://[user:password@]host:port/db",
		"--redis-pubsub", "DLOCKD_REDIS_PUBSUB", "--health-check[=ready]",
		"rediss://", "rediss-sentinel://", "--redis-ca", "DLOCKD_REDIS_CA",
		"--redis-cert", "--redis-key", "--max-read-holds-per-owner",
		"DLOCKD_MAX_READ_HOLDS_PER_OWNER", "--max-read-holds-per-lock",
		"DLOCKD_MAX_READ_HOLDS_PER_LOCK", "--max-fair-queue", "DLOCKD_MAX_FAIR_QUEUE",
	};
	char cmd[300], out[16384];

	snprintf(cmd, sizeof(cmd), "%s --help", dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 0, "--help exits 0");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(strstr(out, want[i]), "--help mentions %s", want[i]);
}

TEST(help_wraps_within_80_columns)
{
	char cmd[300], out[16384], *line, *save = NULL;
	bool options = false;

	snprintf(cmd, sizeof(cmd), "%s --help", dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 0, "--help exits 0");
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		CHECK(strlen(line) <= 80, "a line of %zu columns: %s", strlen(line), line);
		if (!strncmp(line, "  --", 4))
			options = true;
		else if (options)
			CHECK(!strncmp(line, "  -", 3) || strspn(line, " ") == 24,
			      "a continuation line is indented to the help column: '%s'", line);
	}
	CHECK(options, "--help lists options");
	snprintf(cmd, sizeof(cmd), "%s --help", dlockd_binary());
	run_capture(cmd, out, sizeof(out));
	CHECK(strstr(out, "Range: 300..600000") && strstr(out, "Default: 30000") &&
	      strstr(out, "at least --default-ttl-ms") && strstr(out, "--version"),
	      "ranges, defaults, the default/max ttl coupling and --version are shown:\n%s", out);
}

/* The version dlockd should report: VERSION's semantic version, then
 * the commit in parentheses in a git checkout ("0.4.0 (e2b678d)"; just
 * "0.4.0" outside git); *release and *revision (each cap bytes) the two
 * parts. */
static void expected_version(char *out, size_t out_cap, char *release, char *revision,
			     size_t cap)
{
	run_capture("cat VERSION", release, cap);
	release[strcspn(release, "\n")] = '\0';
	*revision = '\0';
	if (access(".git", F_OK) == 0 &&
	    run_capture("git describe --always --dirty --exclude='*' 2>/dev/null", revision,
			cap) == 0)
		revision[strcspn(revision, "\n")] = '\0';
	snprintf(out, out_cap, "%s%s%s%s", release, *revision ? " (" : "", revision,
		 *revision ? ")" : "");
}

TEST(version_is_printed_exported_and_logged)
{
	char cmd[300], out[700], want[600], release[256], revision[256], line[700], series[700];
	struct dlockd_srv d;
	FILE *f;
	bool logged = false;

	expected_version(want, sizeof(want), release, revision, sizeof(release));
	CHECK(*release && strspn(release, "0123456789.") == strlen(release) &&
	      strchr(release, '.') != strrchr(release, '.'),
	      "VERSION holds a semantic version: '%s'", release);
	snprintf(cmd, sizeof(cmd), "%s --version", dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 0, "--version exits 0");
	snprintf(line, sizeof(line), "dlockd %s\n", want);
	CHECK(!strcmp(out, line), "--version prints '%s', want '%s'", out, line);
	snprintf(cmd, sizeof(cmd), "%.*sdlock --version", (int)strlen(dlockd_binary()) - 6,
		 dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 0, "dlock --version exits 0");
	snprintf(line, sizeof(line), "dlock %s\n", want);
	CHECK(!strcmp(out, line), "dlock --version prints '%s', want '%s'", out, line);
	/* the contract's version is the release's */
	run_capture("sed -n 's/^  version: *//p' openapi.yaml | head -n 1", out, sizeof(out));
	out[strcspn(out, "\n")] = '\0';
	CHECK(!strcmp(out, release), "openapi.yaml's info.version '%s' is VERSION's '%s'", out,
	      release);
	run_capture("sed -n 's/^ARG VERSION=//p' Dockerfile", out, sizeof(out));
	out[strcspn(out, "\n")] = '\0';
	CHECK(!strcmp(out, release), "the image's version (ARG VERSION=%s) is VERSION's '%s'", out,
	      release);
	snprintf(cmd, sizeof(cmd), "grep -q '^## \\[%s\\]' CHANGELOG.md", release);
	CHECK(run_capture(cmd, out, sizeof(out)) == 0, "CHANGELOG.md has a section for %s",
	      release);

	/* a dlockd of its own: the suite's was started before any rebuild */
	CHECK(dlockd_start(&d, NULL, NULL) == 0, "start");
	snprintf(series, sizeof(series), "dlockd_build_info{version=\"%s\",revision=\"%s\"}",
		 release, revision);
	CHECK(metric_value(&d, series) == 1, "/metrics has %s 1", series);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	snprintf(out, sizeof(out), "dlockd %s listening", want);
	f = fopen(d.log, "r");
	while (f && fgets(line, sizeof(line), f))
		logged |= strstr(line, out) != NULL;
	if (f)
		fclose(f);
	CHECK(logged, "the start-up line says '%s' (see %s)", out, d.log);
}

/* The default --threads follows the CPUs dlockd may use: pinned to one
 * CPU (taskset, as a cpuset or a CPU quota of half a core would), it runs
 * one event loop, not one per core of the machine. */
TEST(default_threads_follow_the_affinity_mask)
{
	char cmd[600], out[8192];

	snprintf(cmd, sizeof(cmd), "timeout -s TERM 1 taskset -c 0 %s --listen 127.0.0.1:0 "
		 "--redis redis://127.0.0.1:1/0 2>&1", dlockd_binary());
	run_capture(cmd, out, sizeof(out));
	CHECK(strstr(out, "\"threads\":1,"), "pinned to CPU 0: one loop; the start-up line: %s", out);
}

TEST(bad_flags_are_refused)
{
	char cmd[300], out[4096];

	snprintf(cmd, sizeof(cmd), "%s --max-ttl-ms 0 2>&1", dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 2, "exit 2 on a bad number");
	CHECK(strstr(out, "--max-ttl-ms"), "names the flag: %s", out);
	snprintf(cmd, sizeof(cmd), "%s --redis http://x 2>&1", dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 2, "exit 2 on a bad Redis URL");
	snprintf(cmd, sizeof(cmd), "DLOCKD_LOG_LEVEL=loud %s 2>&1", dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 2, "exit 2 on a bad env value");
	CHECK(strstr(out, "DLOCKD_LOG_LEVEL"), "names the variable: %s", out);
	snprintf(cmd, sizeof(cmd), "%s --default-ttl-ms 60001 --max-ttl-ms 60000 2>&1",
		 dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 2, "exit 2 when the default ttl passes the max");
	CHECK(strstr(out, "--default-ttl-ms") && strstr(out, "--max-ttl-ms"),
	      "names both flags: %s", out);
}

TEST(configured_limits_apply)
{
	static const char *const flags[] = { "--max-ttl-ms", "5000", "--max-wait-ms", "1000",
					     "--default-ttl-ms", "2000", "--max-body-bytes", "100",
					     NULL };
	struct dlockd_srv d;
	struct http_resp r;
	char p[512];
	const char *n = lockname("lim");

	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with limits");
	snprintf(p, sizeof(p), "/locks/%s?ttl_ms=5001", n);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_ERROR(r, 400, "invalid_argument", "ttl over --max-ttl-ms");
	CHECK(strstr(json_str(&r, "message"), "1..5000"), "message gives the range: %s", r.body);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?wait_ms=1001", n);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK_ERROR(r, 400, "invalid_argument", "wait over --max-wait-ms");
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s", n);
	http_on(d.base, "PUT", p, "{\"owner\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", &r);
	CHECK_ERROR(r, 413, "body_too_large", "body over --max-body-bytes");
	http_free(&r);
	http_on(d.base, "PUT", p, NULL, &r);
	CHECK(json_int(&r, "ttl_ms") <= 2000 && json_int(&r, "ttl_ms") > 1000,
	      "--default-ttl-ms applies: %s", r.body);
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

TEST(sigterm_answers_waiters_503_and_exits_0)
{
	enum { N = 3 };
	struct dlockd_srv d;
	struct http_resp r;
	struct bg w[N];
	char p[512];
	const char *n = lockname("term");
	int64_t t0;
	int rc;

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "start");
	snprintf(p, sizeof(p), "/locks/%s?owner=holder&ttl_ms=60000", n);
	http_on(d.base, "PUT", p, NULL, &r);
	http_free(&r);
	snprintf(p, sizeof(p), "/locks/%s?wait_ms=60000", n);
	for (int i = 0; i < N; i++)
		bg_start_on(&w[i], d.base, "PUT", p, NULL);
	CHECK(WAIT_FOR(waiters_of(&d) == N, 5000), "waiters waiting");
	t0 = mono_ms();
	rc = dlockd_stop(&d, 5000);
	CHECK(rc == 0, "exit status 0 after SIGTERM, got %d", rc);
	CHECK(mono_ms() - t0 < 2500 * slow_factor(), "stopped in %lld ms",
	      (long long)(mono_ms() - t0));
	for (int i = 0; i < N; i++) {
		bg_join(&w[i]);
		CHECK_ERROR(w[i].r, 503, "backend_unavailable", "waiter answered at shutdown");
		http_free(&w[i].r);
	}
	snprintf(p, sizeof(p), "/locks/%s?force=true", n);
	http("DELETE", p, NULL, &r);
	http_free(&r);
}

/* The first log line of d that contains needle, parsed; NULL if none. */
static json_t *log_line_with(const struct dlockd_srv *d, const char *needle, char *raw, size_t cap)
{
	FILE *f = fopen(d->log, "r");
	char line[4096];
	json_t *j = NULL;

	raw[0] = '\0';
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, needle)) {
			snprintf(raw, cap, "%s", line);
			j = json_loads(line, 0, NULL);
			break;
		}
	if (f)
		fclose(f);
	return j;
}

TEST(logs_are_json_lines_with_an_access_line_per_request)
{
	struct dlockd_srv d;
	struct http_resp r;
	char p[512], raw[4096], url[128];
	const char *n = lockname("log");
	json_t *j;

	/* a password in the Redis URL must not reach the log */
	snprintf(url, sizeof(url), "redis://:s3cr3t-pw@127.0.0.1:%d/0", H_redis.port);
	CHECK(dlockd_start(&d, url, NULL) == 0, "start");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	CHECK(!log_line_with(&d, "s3cr3t-pw", raw, sizeof(raw)) && !strstr(raw, "s3cr3t"),
	      "the Redis password is not logged");

	CHECK(dlockd_start(&d, NULL, NULL) == 0, "start");
	snprintf(p, sizeof(p), "/locks/%s?owner=logger-1&wait_ms=10", n);
	http_on(d.base, "PUT", p, NULL, &r);
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	j = log_line_with(&d, "\"method\":\"PUT\"", raw, sizeof(raw));
	CHECK(j, "an access line in JSON: %s", raw);
	CHECK(json_string_value(json_object_get(j, "method")) &&
	      !strcmp(json_string_value(json_object_get(j, "method")), "PUT"), "method: %s", raw);
	CHECK(json_integer_value(json_object_get(j, "status")) == 200, "status: %s", raw);
	CHECK(json_is_number(json_object_get(j, "duration_ms")), "duration: %s", raw);
	CHECK(json_string_value(json_object_get(j, "lock")) &&
	      !strcmp(json_string_value(json_object_get(j, "lock")), n), "lock name: %s", raw);
	CHECK(json_string_value(json_object_get(j, "owner")) &&
	      !strcmp(json_string_value(json_object_get(j, "owner")), "logger-1"), "owner: %s", raw);
	CHECK(json_string_value(json_object_get(j, "ts")) &&
	      !strcmp(json_string_value(json_object_get(j, "level")), "info"), "ts and level: %s", raw);
	CHECK(!strchr(json_string_value(json_object_get(j, "path")), '?'),
	      "the path carries no query string: %s", raw);
	json_decref(j);
	j = log_line_with(&d, "listening", raw, sizeof(raw));
	CHECK(j && json_string_value(json_object_get(j, "msg")), "events are JSON too: %s", raw);
	json_decref(j);

	{
		static const char *const text[] = { "--log-format", "text", NULL };

		CHECK(dlockd_start(&d, NULL, text) == 0, "start with --log-format text");
		http_on(d.base, "PUT", p, NULL, &r);
		http_free(&r);
		CHECK(dlockd_stop(&d, 5000) == 0, "stop");
		j = log_line_with(&d, " PUT /locks/", raw, sizeof(raw));
		CHECK(!j && strstr(raw, " info  PUT /locks/") && strstr(raw, " 200 ") &&
		      strstr(raw, "owner=logger-1"), "a text access line: %s", raw);
	}
}

/* An event loop thread that cannot be started (pthread_create fails: here
 * under an address-space limit too small for 256 thread stacks) stops
 * dlockd, which exits 1 on its own. It used to hang for ever in
 * server_quiesce(), waiting for loops that never ran to say they stopped
 * accepting, with SIGTERM blocked and the port open but unanswered. Run
 * under prlimit(1); a build whose start needs more address space than the
 * limit (the sanitizers' shadow memory), or a dlockd that fails before its
 * loops (the subscriber thread), proves nothing here and is let go. */
TEST(a_loop_thread_that_cannot_start_stops_dlockd)
{
	struct proc p;
	char listen[64], url[64], log[400], buf[8192];
	const char *argv[] = { "prlimit", "--as=600000000", "--", dlockd_binary(), "--listen",
			       listen, "--redis", url, "--threads", "256", NULL };

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", H_redis.port);
	proc_start(&p, argv, NULL, "loop-thread-fails");
	snprintf(log, sizeof(log), "%s", p.err);
	CHECK(WAIT_FOR(proc_exited(&p) ||
		       file_contains(log, "cannot start an event loop thread"), 10000),
	      "dlockd exits, or fails to start a loop thread: %s",
	      file_read(log, buf, sizeof(buf)));
	if (!file_contains(log, "cannot start an event loop thread")) {
		fprintf(stderr, "# every loop thread started or none was tried: nothing to see\n");
		proc_kill(&p);
		return;
	}
	CHECK(WAIT_FOR(proc_exited(&p), 5000), "dlockd exits after a loop thread failed");
	CHECK(proc_exit_code(&p, 1), "exit status 1, got wait status %d", p.status);
	proc_kill(&p);
}

/* The help says what the server does: --redis' text is whole (it was cut
 * at 512 bytes, mid-sentence, before its default), and an auth-file line
 * has the four fields the server asks for. */
TEST(help_texts_are_whole_and_say_what_the_server_takes)
{
	char cmd[300], out[16384], *flat, *q;

	snprintf(cmd, sizeof(cmd), "%s --help", dlockd_binary());
	CHECK(run_capture(cmd, out, sizeof(out)) == 0, "--help exits 0");
	/* the text unwrapped: runs of spaces and newlines as one space */
	flat = out;
	for (q = out; *q; q++) {
		if ((*q == ' ' || *q == '\n') && flat > out && flat[-1] == ' ')
			continue;
		*flat++ = *q == '\n' ? ' ' : *q;
	}
	*flat = '\0';
	CHECK(strstr(out, "(%40 %2F ...). Default: redis://127.0.0.1:6379/0. [env DLOCKD_REDIS_URL]"),
	      "--redis' text ends with its default and variable: %s", strstr(out, "--redis URL"));
	CHECK(strstr(out, "'<token> <role> <prefix> <name>'"),
	      "--auth-file names the four fields of a line: %s", strstr(out, "--auth-file"));
}

/* dlockd with no Redis where it looks: one warning that says which URL,
 * why, and how to set it, not a word about clusters first; and no
 * "connection lost" for a connection that never was. */
TEST(unreachable_redis_says_which_url_why_and_how_to_set_it)
{
	char url[64], line[2048];
	struct dlockd_srv d;
	bool told = false, cluster_first = false, lost = false;
	FILE *f;

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", free_port());
	CHECK(dlockd_start(&d, url, NULL) == 0, "start with nothing on %s", url);
	CHECK(status_of(&d, "PUT", "/locks/%s?owner=a", lockname("no-redis")) == 503,
	      "a lock call: 503");
	sleep_ms(1500);		/* a reconnect or two */
	CHECK(status_of(&d, "PUT", "/locks/%s?owner=a", lockname("no-redis")) == 503,
	      "a lock call: 503");
	CHECK(dlockd_stop(&d, 5000) == 0, "stop");
	f = fopen(d.log, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!told && strstr(line, "cluster") && strstr(line, "\"warn\""))
			cluster_first = true;
		if (strstr(line, "\"warn\"") && strstr(line, url) && strstr(line, "refused") &&
		    strstr(line, "--redis") && strstr(line, "DLOCKD_REDIS_URL") &&
		    strstr(line, "make run"))
			told = true;
		if (strstr(line, "connection lost"))
			lost = true;
	}
	if (f)
		fclose(f);
	CHECK(told, "a warning names %s, why, --redis, DLOCKD_REDIS_URL and make run (see %s)",
	      url, d.log);
	CHECK(!cluster_first, "no warning about clusters comes first (see %s)", d.log);
	CHECK(!lost, "no 'connection lost' for a connection never made (see %s)", d.log);
}
