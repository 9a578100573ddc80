/* test_auth.c -- --auth-file: bearer tokens, 401 without or with an
 * unknown token, 403 outside a token's prefix or for a client's force
 * release, probes open, SIGHUP reload, reload when the file changes on
 * disk (in place, renamed over, swapped behind a symlink as Kubernetes
 * does), bad files refused, tokens never logged. Each test runs its own
 * dlockd. */
#include "../harness/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
		   CLIENT_A " client team-a- team-a   # team A's services\n"
		   ADMIN " admin * ops\n"
		   "\n"
		   ANY " client * any\n");
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --auth-file");

	CHECK(st(&d, NULL, "GET", "/healthz", NULL) == 200, "probes need no token");
	CHECK(st(&d, NULL, "GET", "/readyz", NULL) == 200, "readyz needs no token");
	/* whitespace around the field value is not part of the token */
	CHECK(st(&d, CLIENT_A " \t", "GET", "/locks/team-a-job", NULL) == 200,
	      "a token with trailing whitespace");
	CHECK(st(&d, CLIENT_A "x", "GET", "/locks/team-a-job", NULL) == 401, "a longer token");
	CHECK(st(&d, "x" CLIENT_A, "GET", "/locks/team-a-job", NULL) == 401, "a token after junk");
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
	write_file(file, ADMIN " admin * ops\nnew-token-71c3 client team-a- team-a-2\n");
	kill(d.pid, SIGHUP);
	CHECK(WAIT_FOR(st(&d, CLIENT_A, "GET", "/locks/team-a-job", NULL) == 401, 3000),
	      "a revoked token is refused after SIGHUP");
	CHECK(st(&d, "new-token-71c3", "GET", "/locks/team-a-job", NULL) == 200,
	      "a new token works after SIGHUP");
	/* a broken file keeps the old tokens */
	write_file(file, "only-two fields\n");	/* (a token without a name, too) */
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

/* Does the token get 200 on a status read (1), 401 (0), or else (-1)? */
static int token_works(const struct dlockd_srv *d, const char *token)
{
	long s = st(d, token, "GET", "/locks/team-a-job", NULL);

	return s == 200 ? 1 : s == 401 ? 0 : -1;
}

/* Kubernetes' AtomicWriter: the files of a version go into a new
 * directory, a symlink to it is made beside ..data and renamed over it. */
static void k8s_publish(const char *dir, const char *version, const char *tokens)
{
	char path[400], link[400];

	snprintf(path, sizeof(path), "%s/%s", dir, version);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%s/tokens", dir, version);
	write_file(path, tokens);
	snprintf(link, sizeof(link), "%s/..data_tmp", dir);
	unlink(link);
	if (symlink(version, link) == 0) {
		snprintf(path, sizeof(path), "%s/..data", dir);
		rename(link, path);
	}
}

TEST(auth_file_reloads_when_it_changes_on_disk)
{
	char dir[300], file[400], tmp[400];
	const char *flags[] = { "--auth-file", file, NULL };
	const int t = 5000;	/* looked at every second */
	struct dlockd_srv d;

	/* a mounted Secret: tokens -> ..data/tokens, ..data -> ..v1 */
	snprintf(dir, sizeof(dir), "%s/secret-%d", test_tmpdir(), (int)getpid());
	mkdir(dir, 0700);
	k8s_publish(dir, "..v1", "tok-one client * one\n");
	snprintf(file, sizeof(file), "%s/tokens", dir);
	CHECK(symlink("..data/tokens", file) == 0, "the Secret's symlink");
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --auth-file");
	CHECK(token_works(&d, "tok-one") == 1, "the first token works");

	/* rewritten in place (through the symlinks), no signal */
	write_file(file, "tok-two client * two\n");
	CHECK(WAIT_FOR(token_works(&d, "tok-two") == 1, t), "a file rewritten in place is read");
	CHECK(token_works(&d, "tok-one") == 0, "its old token is refused");

	/* the Kubernetes way: a new version swapped in behind ..data */
	k8s_publish(dir, "..v2", "tok-three client * three\n");
	CHECK(WAIT_FOR(token_works(&d, "tok-three") == 1, t), "a Secret update is read");
	CHECK(token_works(&d, "tok-two") == 0, "the old version's token is refused");

	/* written beside and renamed over the path */
	snprintf(tmp, sizeof(tmp), "%s/tokens.new", dir);
	write_file(tmp, "tok-four admin * four\n");
	CHECK(rename(tmp, file) == 0, "rename over the path");
	CHECK(WAIT_FOR(token_works(&d, "tok-four") == 1, t), "a file renamed over the path is read");
	CHECK(token_works(&d, "tok-three") == 0, "its old token is refused");
	CHECK(file_lines_with(d.log, "reloaded (it changed on disk): 1 tokens", NULL) == 3,
	      "one line per reload");

	/* a bad file: the old tokens stay, and the log says why, once */
	write_file(file, "only-two fields\n");
	CHECK(WAIT_FOR(file_lines_with(d.log, "not reloaded (it changed on disk)",
				       "want '<token> <role> <prefix> <name>'", NULL) == 1, t),
	      "the bad file is refused, with the reason");
	CHECK(token_works(&d, "tok-four") == 1, "the old tokens stay in force");
	/* the wait is what is tested: a bad file is tried once per change,
	 * not once per look */
	sleep_ms(2500);
	CHECK(file_lines_with(d.log, "not reloaded", NULL) == 1, "logged once, not every second");
	CHECK(file_lines_with(d.log, "reloaded (it changed on disk)", NULL) == 4,
	      "no reload without a change");

	/* a token listed twice (a client line, then an admin line) is refused
	 * on reload too: the whole file is, so it gains no admin rights */
	write_file(file, "tok-four admin * four\ntok-dup client * dup\ntok-dup admin * ops\n");
	CHECK(WAIT_FOR(file_lines_with(d.log, "not reloaded (it changed on disk)",
				       "the same as the one named 'dup'", NULL) == 1, t),
	      "a duplicated token is refused on reload, with the reason");
	CHECK(token_works(&d, "tok-dup") == 0, "the file with it is not in force");
	CHECK(!file_contains(d.log, "tok-dup"), "the token is not in the log");

	/* the file gone, then back */
	unlink(file);
	CHECK(WAIT_FOR(file_lines_with(d.log, "not reloaded", "No such file", NULL) == 1, t),
	      "a missing file is refused");
	CHECK(token_works(&d, "tok-four") == 1, "the old tokens stay in force");
	write_file(file, "tok-five client * five\n");
	CHECK(WAIT_FOR(token_works(&d, "tok-five") == 1, t), "the file back is read");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* Each bad file stops dlockd at start (exit 2) with file:line and what is
 * wrong, never the token itself. */
TEST(auth_file_errors_stop_dlockd_at_start)
{
	static const struct {
		const char *text;
		const char *want;	/* in the message, after ":2:" */
	} bad[] = {
		{ "ok-token client * ok\nsecret-token superuser * su\n", "superuser" },
		{ "ok-token client * ok\nsecret-token client billing-\n",
		  "the token needs a name (a 4th field" },
		{ "ok-token client * ok\nsecret-token client * ok\n", "name 'ok' is given to another" },
		{ "ok-token client * ok\nsecret-token client * a/b\n", "name 'a/b' must be 1 to 64" },
		{ "ok-token client * ok\nsecret-token client * a b\n", "want '<token> <role> <prefix> "
		  "<name>'" },
		/* the same token twice would get the last line's rights */
		{ "secret-token client billing- team-a\nsecret-token admin * ops\n",
		  "the same as the one named 'team-a'" },
	};
	char file[300], cmd[700], out[2048];
	const char *bin = dlockd_binary();
	FILE *p;
	size_t n;
	int rc;

	snprintf(file, sizeof(file), "%s/bad-tokens", test_tmpdir());
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(file, bad[i].text);
		/* bounded: a dlockd that wrongly accepts the file would serve on */
		snprintf(cmd, sizeof(cmd), "timeout -s KILL 20 %s --auth-file %s --listen "
			 "127.0.0.1:0 2>&1", bin, file);
		p = popen(cmd, "r");
		n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
		out[n] = '\0';
		rc = p ? pclose(p) : -1;
		CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "exit 2 on a bad auth file (%d): %s",
		      rc, bad[i].text);
		CHECK(strstr(out, ":2:") && strstr(out, bad[i].want),
		      "names the line and the problem (%s): %s", bad[i].want, out);
		CHECK(!strstr(out, "secret-token"), "without echoing the token: %s", out);
	}
}

#define BILL_A "tok-bill-a-6d0e91c4b27f"
#define BILL_B "tok-bill-b-2a7c58e9f013"

/* A holding is bound to the name of the token it was taken under: another
 * client token whose prefix covers the name, sending the same owner id, is
 * refused 409 not_owner on DELETE, heartbeat and PUT (repeat or re-entry),
 * and the lock is left as it was; the first token still releases it, an
 * admin still forces it. For every kind. */
TEST(auth_holdings_are_bound_to_their_tokens_name)
{
	static const struct {
		const char *res;	/* the resource of lock %s */
		const char *field;	/* the owner's field in the lock hash */
	} sides[] = {
		{ "/locks/%s", "w1" },
		{ "/fairlocks/%s", "w1" },
		{ "/rwlocks/%s/read", "w1" },
		{ "/rwlocks/%s/write", "w1:write" },
	};
	/* as w1, with another token than the holding's: each is refused */
	static const struct {
		const char *token, *method, *rest, *what;
	} refused[] = {
		{ BILL_B, "DELETE", "?owner=w1", "team-b's DELETE" },
		{ BILL_B, "POST", "/heartbeat?owner=w1&ttl_ms=90000", "team-b's heartbeat" },
		{ BILL_B, "PUT", "?owner=w1&ttl_ms=90000", "team-b's PUT" },
		{ BILL_B, "PUT", "?owner=w1&ttl_ms=90000&reentrant=true", "team-b's re-entry" },
		{ ADMIN, "DELETE", "?owner=w1", "an admin's plain DELETE (force is the way)" },
	};
	char file[300], res[200], p[400];
	const char *flags[] = { "--auth-file", file, NULL };
	struct dlockd_srv d;
	struct http_resp r;
	redisReply *rep;

	snprintf(file, sizeof(file), "%s/bound-tokens", test_tmpdir());
	write_file(file, BILL_A " client billing- team-a\n"
		   BILL_B " client bill team-b\n"
		   ADMIN " admin * ops\n");
	CHECK(dlockd_start(&d, NULL, flags) == 0, "start with --auth-file");

	for (size_t i = 0; i < sizeof(sides) / sizeof(sides[0]); i++) {
		const char *n = "billing-y";
		long long token, pttl;
		char want[80];

		snprintf(res, sizeof(res), sides[i].res, n);
		snprintf(p, sizeof(p), "%s?owner=w1&ttl_ms=30000", res);
		st(&d, BILL_A, "PUT", p, &r);
		CHECK_STATUS(r, 200, "team-a takes it as w1");
		token = json_int(&r, "fencing_token");
		http_free(&r);
		snprintf(want, sizeof(want), "%lld team-a", token);
		rep = rcmd("HGET dlockd_lock_owners:{%s} %s", n, sides[i].field);
		CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, want),
		      "%s: the holding records its token and the token's name, '%s'", res, want);
		freeReplyObject(rep);
		pttl = rcmd_int("PTTL %s", n);

		for (size_t j = 0; j < sizeof(refused) / sizeof(refused[0]); j++) {
			snprintf(p, sizeof(p), "%s%s", res, refused[j].rest);
			st(&d, refused[j].token, refused[j].method, p, &r);
			CHECK_ERROR(r, 409, "not_owner", refused[j].what);
			CHECK(strstr(json_str(&r, "message"), "under another bearer token"), "%s: %s",
			      refused[j].what, r.body);
			http_free(&r);
		}

		CHECK(rcmd_int("HGET %s %s", n, sides[i].field) == 1 &&
		      rcmd_int("PTTL %s", n) <= pttl, "%s: untouched: one hold, lease not extended",
		      res);
		snprintf(p, sizeof(p), "%s?owner=w1&ttl_ms=30000", res);
		st(&d, BILL_A, "PUT", p, &r);
		CHECK(r.status == 200 && json_int(&r, "fencing_token") == token &&
		      json_int(&r, "holds") == 1, "%s: team-a's repeat: %s", res, r.body);
		http_free(&r);
		snprintf(p, sizeof(p), "%s?owner=w1", res);
		st(&d, BILL_A, "DELETE", p, &r);
		CHECK(r.status == 200 && json_bool(&r, "released") == 1, "%s: team-a releases: %s",
		      res, r.body);
		http_free(&r);
		CHECK(rcmd_int("EXISTS %s", n) == 0, "%s: free", res);
	}

	/* GET shows the lock held by w1 with one hold, to either token */
	CHECK(st(&d, BILL_A, "PUT", "/locks/billing-y?owner=w1", NULL) == 200, "team-a again");
	st(&d, BILL_B, "GET", "/locks/billing-y?owner=w1", &r);
	CHECK(json_bool(&r, "held") == 1 && json_int(&r, "holds") == 1, "status: %s", r.body);
	http_free(&r);
	st(&d, ADMIN, "DELETE", "/locks/billing-y?force=true", &r);
	CHECK(r.status == 200 && json_bool(&r, "released") == 1, "an admin forces it: %s", r.body);
	http_free(&r);
	CHECK(rcmd_int("EXISTS dlockd_lock_owners:{billing-y}") == 0, "holders' hash gone");

	/* a stale entry (its lock gone) binds nothing */
	rcmd_int("HSET dlockd_lock_owners:{billing-y} w1 %s", "5 team-b");
	CHECK(st(&d, BILL_A, "PUT", "/locks/billing-y?owner=w1", NULL) == 200,
	      "team-a takes w1 despite team-b's stale entry");
	CHECK(st(&d, BILL_A, "DELETE", "/locks/billing-y?owner=w1", NULL) == 200, "and releases");
	CHECK(rcmd_int("EXISTS billing-y dlockd_lock_owners:{billing-y}") == 0, "nothing left");
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
	CHECK(!file_contains(d.log, "tok-bill-"), "no token in the log");
}
