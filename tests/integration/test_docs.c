/* test_docs.c -- the docs cannot rot. Every command README.md and docs/
 * show is run: the blocks marked <!-- run: doc-check --> by
 * tests/check-doc-commands.sh --run, here, against a redis-server and
 * dlockd of this test's, their output's shape compared with the page's;
 * the others name the test that runs them, which must exist. The
 * settings' documents come from the options tables:
 * docs/reference/configuration.md and docs/reference/dlock.md are what
 * the binaries under test generate, their man pages render without a
 * groff warning, and every option of --help (and of dlock's getopt table)
 * is in the man page and the reference (tests/check-reference.sh, which
 * `make lint` runs too). */
#include "../harness/harness.h"

#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

TEST(reference_and_man_pages_agree_with_help)
{
	char build[256], cmd[1024], log[400], out[8192];
	int rc;

	snprintf(build, sizeof(build), "%s", dlockd_binary());
	snprintf(log, sizeof(log), "%s/check-reference.log", test_tmpdir());
	snprintf(cmd, sizeof(cmd), "sh tests/check-reference.sh %s >%s 2>&1", dirname(build), log);
	rc = system(cmd);
	file_read(log, out, sizeof(out));
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && !strstr(out, "not ok"),
	      "tests/check-reference.sh passes:\n%s", out);
	CHECK(strstr(out, "ok - docs/reference/configuration.md is current") &&
	      strstr(out, "ok - docs/reference/dlock.md is current") &&
	      strstr(out, "ok - dlockd.8 renders without warnings") &&
	      strstr(out, "ok - dlock.1 renders without warnings"),
	      "and checked the references and both man pages:\n%s", out);
}

/* The hidden --help-format takes man or markdown, nothing else, and
 * prints every row: the reference of a setting is never missing. */
TEST(help_format_prints_man_or_markdown_only)
{
	char cmd[512], log[400], out[65536];
	int rc;

	snprintf(log, sizeof(log), "%s/help-format.out", test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s --help-format=html >%s 2>&1", dlockd_binary(), log);
	rc = system(cmd);
	file_read(log, out, sizeof(out));
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2 && strstr(out, "not man or markdown"),
	      "--help-format=html is a bad setting (exit 2): %s", out);
	snprintf(cmd, sizeof(cmd), "%s --help-format=man >%s 2>&1", dlockd_binary(), log);
	rc = system(cmd);
	file_read(log, out, sizeof(out));
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && !strncmp(out, ".\\\"", 3) &&
	      strstr(out, ".TH DLOCKD 8") && strstr(out, "\\-\\-redis\\-pubsub") &&
	      strstr(out, "DLOCKD_REDIS_PUBSUB"), "man: a man page of every row");
	snprintf(cmd, sizeof(cmd), "%s --help-format=markdown >%s 2>&1", dlockd_binary(), log);
	rc = system(cmd);
	file_read(log, out, sizeof(out));
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0 &&
	      strstr(out, "| `--listen HOST:PORT` | `DLOCKD_LISTEN` | 127.0.0.1:8080 |  |") &&
	      strstr(out, "| `--redis-sync-replicas off\\|auto\\|N` |") &&
	      strstr(out, "| 300..600000 |"),
	      "markdown: a table row per setting, '|' escaped, ranges shown");
}

/* The reference and the man page say more than --help: each setting's
 * details (URL forms, costs, what is re-read, what is refused), as the
 * README's settings table did; --help stays short. A few of those facts,
 * in both documents and not in --help. */
TEST(help_stays_short_the_reference_and_man_page_have_the_details)
{
	static const char *const details[] = {
		"redis://:p%40ss%2Fw%3Ard@host:6379/0",	/* --redis: percent-encoding */
		"half a core gives 1 thread",		/* --threads: cgroup quota */
		"up to 256 of that loop's fair-lock waiters",	/* --queue-ttl-ms: cost */
		"closed unanswered",			/* --max-connections over HTTPS */
		"(slowloris)",				/* --idle-timeout-s */
		"a NameMapper that adds the same prefix",	/* --key-prefix */
		"1.5 s after dlockd sent them",		/* --redis-sync-timeout-ms */
		"PUBSUB SHARDNUMSUB answers",		/* --redis-pubsub */
		"0.0.0.0 asked on 127.0.0.1",		/* --health-check */
	};
	static const char *const formats[] = { "--help", "--help-format=markdown",
					       "--help-format=man" };
	char cmd[512], log[400], out[3][65536];

	for (int f = 0; f < 3; f++) {
		snprintf(log, sizeof(log), "%s/details-%d.out", test_tmpdir(), f);
		snprintf(cmd, sizeof(cmd), "%s %s >%s 2>&1", dlockd_binary(), formats[f], log);
		CHECK(system(cmd) == 0, "dlockd %s exits 0", formats[f]);
		file_read(log, out[f], sizeof(out[f]));
	}
	for (size_t i = 0; i < sizeof(details) / sizeof(details[0]); i++) {
		CHECK(strstr(out[1], details[i]), "the reference says '%s'", details[i]);
		CHECK(strstr(out[2], details[i]), "the man page says '%s'", details[i]);
		CHECK(!strstr(out[0], details[i]), "--help leaves out '%s'", details[i]);
	}
}

/* Each page's runnable example runs as the page shows it: every
 * doc-check block of README.md and docs/ exits 0 against a real dlockd,
 * with the output the page shows (the keys of each JSON line, the first
 * word of the others); and every other sh or console block names a test
 * that exists, or why it cannot run here. */
TEST(every_command_of_the_docs_runs_as_shown)
{
	struct redis_srv rs = { 0 };
	struct dlockd_srv d;
	char build[256], cmd[1024], log[400], out[65536];
	const char *summary, *p;
	int rc, ran = 0, want = -1;

	CHECK(redis_dlockd_start(&rs, &d, NULL) == 0, "start Redis and dlockd");
	snprintf(build, sizeof(build), "%s", dlockd_binary());
	snprintf(log, sizeof(log), "%s/check-doc-commands.log", test_tmpdir());
	snprintf(cmd, sizeof(cmd), "sh tests/check-doc-commands.sh --run %s %s >%s 2>&1", d.base,
		 dirname(build), log);
	rc = system(cmd);
	file_read(log, out, sizeof(out));
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && !strstr(out, "not ok"),
	      "tests/check-doc-commands.sh --run passes:\n%s", out);
	for (p = out; (p = strstr(p, " runs as shown")); p++)
		ran++;
	summary = strstr(out, "# ");
	CHECK(summary && sscanf(summary, "# %d blocks run here", &want) == 1 && want > 0 &&
	      ran == want, "each of the %d doc-check blocks ran (%d did):\n%s", want, ran, out);
	CHECK(redis_dlockd_stop(&rs, &d, 5000) == 0, "dlockd exits cleanly");
}
