/* test_session_list.c -- what dlockd tells of sessions as a whole (issue
 * 30): GET /sessions lists every open one for an admin (a client token is
 * refused), the dlockd_sessions gauge counts those open in Redis, every
 * dlockd's, as of the last session call (under a key prefix of the
 * test's own: only its sessions count), and the access log keeps a
 * session's heartbeat quiet like any heartbeat. */
#include "../harness/harness.h"

#include <stdio.h>
#include <string.h>

TEST(sessions_gauge_counts_every_dlockds_open_sessions)
{
	char prefix[80], id[3][33];
	const char *flags[] = { "--key-prefix", prefix, NULL };
	struct dlockd_srv a, b;

	snprintf(prefix, sizeof(prefix), "%.60s:", lockname("gauge"));
	CHECK(dlockd_start(&a, NULL, flags) == 0, "dlockd a starts");
	CHECK(dlockd_start(&b, NULL, flags) == 0, "dlockd b starts");
	CHECK(session_start_on(a.base, 300, id[0]), "a short session on a");
	CHECK(session_start_on(a.base, 30000, id[1]), "a long session on a");
	CHECK(metric_value(&a, "dlockd_sessions") == 2, "a counts 2 open: %g",
	      metric_value(&a, "dlockd_sessions"));
	sleep_ms(600);	/* the short session's lease runs out: under test */
	CHECK(session_start_on(b.base, 30000, id[2]), "a session on b");
	CHECK(metric_value(&b, "dlockd_sessions") == 2,
	      "b counts 2 open (a's long one and its own): %g", metric_value(&b, "dlockd_sessions"));
	for (int i = 1; i < 3; i++)
		CHECK(status_of(&a, "DELETE", "/sessions/%s", id[i]) == 200, "DELETE %d", i);
	/* a DELETE answers before its count does */
	CHECK(WAIT_FOR(metric_value(&a, "dlockd_sessions") == 0, 3000),
	      "none open after the DELETEs: %g", metric_value(&a, "dlockd_sessions"));
	CHECK(dlockd_stop(&a, 5000) == 0, "a exits cleanly");
	CHECK(dlockd_stop(&b, 5000) == 0, "b exits cleanly");
}

#define LIST_TOK_A "tok-list-a-7d3e9b1f5c"
#define LIST_TOK_ADMIN "tok-list-admin-2e8f4a6c0b"

TEST(sessions_list_every_open_one_for_an_admin_only)
{
	char id[2][33];
	struct dlockd_srv d;
	struct http_resp r;

	CHECK(dlockd_start_auth(&d, "list-tokens", LIST_TOK_A " client list- team-a\n"
				LIST_TOK_ADMIN " admin * ops\n") == 0, "start with --auth-file");
	http_bearer(LIST_TOK_A);
	CHECK(session_start_on(d.base, 30000, id[0]), "team-a makes a session");
	CHECK(session_start_on(d.base, 300, id[1]), "and a short one");
	CHECK(http_on(d.base, "GET", "/sessions", NULL, &r) == 0, "GET /sessions answers");
	CHECK_ERROR(r, 403, "forbidden", "a client lists every session");
	http_free(&r);
	sleep_ms(600);	/* the short one's lease runs out: it is no longer listed */
	http_bearer(LIST_TOK_ADMIN);
	CHECK(http_on(d.base, "GET", "/sessions?limit=1000", NULL, &r) == 0 && r.status == 200,
	      "an admin lists every session: %ld %s", r.status, r.body ? r.body : "");
	CHECK(strstr(r.body, id[0]) && strstr(r.body, "\"creator\":\"team-a\""),
	      "team-a's session is listed with its token name: %s", r.body);
	CHECK(!strstr(r.body, id[1]), "the ended one is not: %s", r.body);
	CHECK(json_int(&r, "total") >= 1, "and counted: %s", r.body);
	http_free(&r);
	CHECK(http_on(d.base, "GET", "/sessions?limit=1001", NULL, &r) == 0, "GET answers");
	CHECK_ERROR(r, 400, "invalid_argument", "a limit past 1000");
	http_free(&r);
	CHECK(status_of(&d, "DELETE", "/sessions/%s", id[0]) == 200, "the admin ends it");
	http_bearer(NULL);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* A session's heartbeat is quiet in the access log like any heartbeat
 * (one every few seconds from every session): at debug, at info only with
 * --log-heartbeats on; a failed one is logged at info either way. */
TEST(sessions_heartbeat_is_quiet_in_the_access_log)
{
	static const char *const hb[] = { "--log-heartbeats", "on", NULL };
	struct dlockd_srv d;
	char id[33];

	for (int round = 0; round < 2; round++) {
		CHECK(dlockd_start(&d, NULL, round ? hb : NULL) == 0, "start (round %d)", round);
		CHECK(session_start_on(d.base, 30000, id), "a session");
		CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 200, "renewed");
		CHECK(status_of(&d, "DELETE", "/sessions/%s", id) == 200, "ended");
		CHECK(status_of(&d, "POST", "/sessions/%s/heartbeat", id) == 404, "ended: 404");
		CHECK(dlockd_stop(&d, 5000) == 0, "stop");
		CHECK(file_lines_with(d.log, "\"path\":\"/sessions/", "/heartbeat\"",
				      "\"status\":200", "\"level\":\"info\"", NULL) == round,
		      "a heartbeat's success %s", round ? "at info with --log-heartbeats on"
							: "not at info");
		CHECK(file_lines_with(d.log, "/heartbeat\"", "\"status\":404", "\"level\":\"info\"",
				      NULL) == 1, "a failed heartbeat at info (round %d)", round);
	}
}
