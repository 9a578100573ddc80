/* test_auth.c -- --auth-file: bearer tokens, 401 without or with an
 * unknown token, 403 outside a token's prefix or for a client's force
 * release, probes open, SIGHUP reload, bad files refused, tokens never
 * logged. Each test runs its own dlockd. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define CLIENT_A "tok-client-a-3f9c2e71d0b84a56"
#define ADMIN "tok-admin-8e1d47c2a9f05b63"
#define ANY "tok-any-5b2e9d1c7a3f4e60"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static long st(const struct dlockd_srv *d, const char *token, const char *method,
	       const char *path, struct http_resp *out)
{
	struct http_resp r;
	long s;

	http_bearer(token);
	http_on(d->base, method, path, NULL, &r);
	http_bearer(NULL);
	s = r.status;
	if (out)
		*out = r;
	else
		http_free(&r);
	return s;
}

TEST(auth_tokens_roles_and_prefixes)
{
	char file[300];
	const char *flags[] = { "--auth-file", file, NULL };
	struct dlockd_srv d;
	struct http_resp r;
	FILE *log;
	char line[4096];
	bool leaked = false;

	snprintf(file, sizeof(file), "%s/tokens", test_tmpdir());
	write_file(file, "# dlockd tokens\n"
		   CLIENT_A " client team-a-   # team A's services\n"
		   ADMIN " admin *\n"
		   "\n"
		   ANY " client *\n");
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --auth-file");

	CHECK(st(&d, NULL, "GET", "/healthz", NULL) == 200, "probes need no token");
	CHECK(st(&d, NULL, "GET", "/readyz", NULL) == 200, "readyz needs no token");
	st(&d, NULL, "PUT", "/locks/team-a-job", &r);
	CHECK_ERROR(r, 401, "unauthorized", "no token");
	http_free(&r);
	st(&d, "not-a-token", "PUT", "/locks/team-a-job", &r);
	CHECK_ERROR(r, 401, "unauthorized", "unknown token");
	http_free(&r);
	st(&d, CLIENT_A "x", "PUT", "/locks/team-a-job", &r);
	CHECK_ERROR(r, 401, "unauthorized", "a known token with one byte more");
	http_free(&r);
	st(&d, "tok-client-a-3f9c2e71d0b84a5", "PUT", "/locks/team-a-job", &r);
	CHECK_ERROR(r, 401, "unauthorized", "a known token with one byte less");
	http_free(&r);

	CHECK(st(&d, CLIENT_A, "PUT", "/locks/team-a-job?owner=a1", NULL) == 200,
	      "a client token inside its prefix");
	st(&d, CLIENT_A, "PUT", "/locks/team-b-job?owner=a1", &r);
	CHECK_ERROR(r, 403, "forbidden", "outside its prefix");
	http_free(&r);
	st(&d, CLIENT_A, "PUT", "/rwlocks/team-b-doc/read?owner=a1", &r);
	CHECK_ERROR(r, 403, "forbidden", "every kind is scoped");
	http_free(&r);
	st(&d, CLIENT_A, "DELETE", "/locks/team-a-job?force=true", &r);
	CHECK_ERROR(r, 403, "forbidden", "a client may not force a release");
	http_free(&r);
	CHECK(rcmd_int("EXISTS team-a-job") == 1, "the lock is still held after the refused force");
	CHECK(st(&d, ANY, "GET", "/locks/team-a-job", NULL) == 200, "prefix * covers every name");
	st(&d, ADMIN, "DELETE", "/locks/team-a-job?force=true", &r);
	CHECK(r.status == 200 && json_bool(&r, "released") == 1, "an admin may: %s", r.body);
	http_free(&r);

	/* SIGHUP: team A's token is revoked, a new one appears */
	write_file(file, ADMIN " admin *\nnew-token-71c3 client team-a-\n");
	kill(d.pid, SIGHUP);
	CHECK(WAIT_FOR(st(&d, CLIENT_A, "GET", "/locks/team-a-job", NULL) == 401, 3000),
	      "a revoked token is refused after SIGHUP");
	CHECK(st(&d, "new-token-71c3", "GET", "/locks/team-a-job", NULL) == 200,
	      "a new token works after SIGHUP");
	/* a broken file keeps the old tokens */
	write_file(file, "only-two fields\n");
	kill(d.pid, SIGHUP);
	CHECK(WAIT_FOR(file_contains(d.log, "not reloaded"), 3000), "the bad file is refused");
	CHECK(st(&d, "new-token-71c3", "GET", "/locks/team-a-job", NULL) == 200,
	      "a bad file on SIGHUP keeps the tokens in force");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");

	log = fopen(d.log, "r");
	while (log && fgets(line, sizeof(line), log))
		leaked |= strstr(line, "tok-") || strstr(line, "new-token");
	if (log)
		fclose(log);
	CHECK(!leaked, "no token appears in the log");
	rcmd_int("DEL team-a-job");
}

TEST(auth_file_errors_stop_dlockd_at_start)
{
	char file[300], cmd[700], out[2048];
	const char *bin = dlockd_binary();
	FILE *p;
	size_t n;
	int rc;

	snprintf(file, sizeof(file), "%s/bad-tokens", test_tmpdir());
	write_file(file, "ok-token client *\nsecret-token superuser *\n");
	snprintf(cmd, sizeof(cmd), "%s --auth-file %s --listen 127.0.0.1:0 2>&1", bin, file);
	p = popen(cmd, "r");
	n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
	out[n] = '\0';
	rc = p ? pclose(p) : -1;
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "exit 2 on a bad auth file (%d)", rc);
	CHECK(strstr(out, ":2:") && strstr(out, "superuser"), "names the line and the problem: %s",
	      out);
	CHECK(!strstr(out, "secret-token"), "without echoing the token: %s", out);
}
