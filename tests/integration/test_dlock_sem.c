/* test_dlock_sem.c -- dlock and semaphores: `dlock run --limit N NAME`
 * runs at most N commands at once, with everything dlock run promises;
 * status and list show semaphores; --value for every kind. */
#include "../harness/dlock_cli.h"
#include "../harness/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

TEST(dlock_run_limit_runs_at_most_n_commands_at_once)
{
	enum { RUNS = 6, LIMIT = 2 };
	const char *n = lockname("dlock-sem");
	char file[400], script[1000], buf[8192], *line, *save = NULL;
	struct proc p[RUNS];
	int inside = 0, most = 0, starts = 0;

	snprintf(file, sizeof(file), "%s/sem-stamps-%s", test_tmpdir(), n);
	snprintf(script, sizeof(script),
		 "echo \"S $DLOCK_KIND $DLOCK_FENCING_TOKEN\" >> %s; sleep 0.3; echo E >> %s",
		 file, file);
	for (int i = 0; i < RUNS; i++)
		dlock_start(&p[i], NULL, NULL, "sem-run", "run", "--limit", "2", n, "--", "sh", "-c", script, NULL);
	for (int i = 0; i < RUNS; i++) {
		char err[4096];

		CHECK(dlock_wait(&p[i]) == 0, "run %d exits 0: %s", i,
		      file_read(p[i].err, err, sizeof(err)));
	}
	file_read(file, buf, sizeof(buf));
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == 'S') {
			CHECK(!strncmp(line, "S semaphore ", 12), "DLOCK_KIND: %s", line);
			starts++;
			if (++inside > most)
				most = inside;
		} else {
			inside--;
		}
	}
	CHECK(starts == RUNS, "%d runs started", starts);
	CHECK(most <= LIMIT, "at most %d at once, saw %d", LIMIT, most);
	CHECK(most == LIMIT, "two at once (saw %d): a permit each", most);
	CHECK(rcmd_int("GET %s", n) == LIMIT && rcmd_int("EXISTS {%s}:timeout", n) == 0,
	      "every permit given back");
}

TEST(dlock_status_list_and_value_with_semaphores)
{
	const char *n = lockname("dlock-semst");
	char buf[4096];
	struct proc hold, st, ls, bad;

	dlock_start(&hold, NULL, NULL, "sem-hold", "run", "--limit", "3", "--value", "host-a:9000", n, "--",
		 "sleep", "3", NULL);
	CHECK(WAIT_FOR(rcmd_int("EXISTS {%s}:timeout", n) == 1, 10000), "the run holds a permit");
	dlock_start(&st, NULL, NULL, "sem-status", "status", "--kind", "semaphore", n, NULL);
	CHECK(dlock_wait(&st) == 0, "status exits 0 while a permit is out");
	file_read(st.out, buf, sizeof(buf));
	CHECK(strstr(buf, "\"limit\":3") && strstr(buf, "\"value\":\"host-a:9000\""),
	      "status shows the semaphore and the value: %s", buf);
	dlock_start(&ls, NULL, NULL, "sem-list", "list", n, NULL);
	CHECK(dlock_wait(&ls) == 0, "list");
	file_read(ls.out, buf, sizeof(buf));
	CHECK(strstr(buf, n) != NULL, "list names the semaphore: %s", buf);
	CHECK(dlock_wait(&hold) == 0, "the run ends");

	dlock_start(&bad, NULL, NULL, "sem-bad", "run", "--kind", "fair", "--limit", "2", n, "--", "true",
		 NULL);
	CHECK(dlock_wait(&bad) == 64, "--limit with another kind is a usage error");
	dlock_start(&bad, NULL, NULL, "sem-bad2", "acquire", "--kind", "semaphore", n, NULL);
	CHECK(dlock_wait(&bad) == 64, "a semaphore's acquire needs --limit");
	dlock_start(&bad, NULL, NULL, "sem-bad-ttl", "run", "--limit", "2", "-t", "100000000s", n,
		    "--", "true", NULL);
	CHECK(dlock_wait(&bad) == 64, "a --ttl too long is a usage error");
	CHECK(strstr(file_read(bad.err, buf, sizeof(buf)), "from 300ms to 24 days"),
	      "saying the range, not only its floor: %s", buf);
	dlock_start(&bad, NULL, NULL, "sem-bad3", "run", "--limit", "5", n, "--", "true", NULL);
	CHECK(dlock_wait(&bad) == 77, "another limit than the one in force is refused (77)");
}

/* Everything dlock run promises holds for a permit: renewed past its
 * lease, and a permit taken away (an admin's forced release) stops the
 * command and exits 75. */
TEST(dlock_run_limit_renews_and_stops_the_command_when_the_permit_is_taken)
{
	const char *n = lockname("dlock-semlost");
	char err[4096];
	struct proc p;
	int64_t t0;
	int code;

	dlock_start(&p, NULL, NULL, "sem-lost", "run", "--limit", "2", "--ttl", "1500ms", "--grace", "500ms", n,
		 "--", "sleep", "60", NULL);
	CHECK(WAIT_FOR(rcmd_int("ZCARD {%s}:timeout", n) == 1, 5000), "dlock holds a permit");
	sleep_ms(2500);		/* past the lease: only renewals keep it */
	CHECK(!proc_exited(&p) && rcmd_int("ZCARD {%s}:timeout", n) == 1,
	      "the permit is renewed past its first lease");
	CHECK(status_of(NULL, "DELETE", "/semaphores/%s?force=true", n) == 200,
	      "an admin takes every permit back");
	t0 = mono_ms();
	CHECK(WAIT_FOR(proc_exited(&p), 10000), "dlock ends");
	code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
	CHECK(code == 75, "the lease-lost code 75, got %d: %s", code,
	      file_read(p.err, err, sizeof(err)));
	CHECK(mono_ms() - t0 < 1000 + 1500LL * slow_factor(), "within a heartbeat (%lld ms)",
	      (long long)(mono_ms() - t0));
}
