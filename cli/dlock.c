/* dlock.c -- the command-line client of dlockd, for shell scripts: `dlock
 * run NAME -- COMMAND` runs a command while holding a lock (run.c), and
 * acquire, renew, release, status and list manage or read a lock across a
 * script's steps. Options, subcommands and exit codes; the lock's requests
 * are in lease.c. */
#include <curl/curl.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/base/version.h"
#include "args.h"
#include "lease.h"
#include "run.h"

#define DEFAULT_SERVER "http://127.0.0.1:8080"
#define DEFAULT_TTL_MS 15000
#define DEFAULT_GRACE_MS 5000

static const char usage_text[] =
"usage: dlock run [options] NAME [--] COMMAND [ARGS...]\n"
"       dlock acquire [options] NAME      print DLOCK_* assignments for eval\n"
"       dlock renew [options] [NAME]      renew the lease (a heartbeat)\n"
"       dlock release [options] [NAME]    release one hold (--force: whoever holds it)\n"
"       dlock status [options] NAME       the lock's state as JSON; exit 0 if locked\n"
"       dlock list [options] [PREFIX]     the names of the locks held, one a line\n"
"\n"
"Options (before NAME):\n"
"  -k, --kind KIND        lock (default), fair, read, write or semaphore\n"
"      --limit N          one of N permits of semaphore NAME (1..10000; sets\n"
"                         --kind semaphore; every user of NAME gives the same N)\n"
"      --value TEXT       the holder value kept with the holding (UTF-8, at most\n"
"                         1024 bytes): status and watchers see it\n"
"  -s, --server URL       dlockd's address (default $DLOCK_SERVER, else " DEFAULT_SERVER ")\n"
"      --token-file FILE  the bearer token, on the file's first line (default\n"
"                         $DLOCK_TOKEN; never on the command line, which ps shows)\n"
"      --cacert FILE      for https://: the CA to trust (default $DLOCK_CACERT,\n"
"                         else the system's)\n"
"      --cert FILE, --key FILE\n"
"                         for https:// with mutual TLS: the client certificate\n"
"                         and its key (default $DLOCK_CERT, $DLOCK_KEY)\n"
"  -o, --owner ID         the owner id (default: unique to this run; renew and\n"
"                         release take $DLOCK_OWNER when NAME is $DLOCK_NAME)\n"
"  -w, --wait DURATION    wait this long for the lock (default: until acquired)\n"
"  -n, --no-wait          do not wait: fail at once if it is held\n"
"  -t, --ttl DURATION     the lease (default 15s)\n"
"  -g, --grace DURATION   run: SIGTERM to SIGKILL, both inside the lease (default\n"
"                         5s, or a third of --ttl if less; at most half of --ttl)\n"
"  -E, --conflict-exit-code N\n"
"                         exit status when not acquired in time (default 1)\n"
"      --force            release: free the lock whoever holds it (an admin's)\n"
"      --json             list: one JSON object a line, not only the names\n"
"  -h, --help             this text;  -V, --version  dlock's version\n"
"\n"
"Durations: 500ms, 30s, 5m, 1h; a bare number is seconds.\n"
"\n"
"dlock run runs COMMAND (no shell) in a process group of its own with\n"
"DLOCK_NAME, DLOCK_KIND, DLOCK_OWNER and DLOCK_FENCING_TOKEN in its\n"
"environment, forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and\n"
"SIGALRM to the group, stops it with dlock on Ctrl-Z, and releases the lock\n"
"when it ends. The command never runs outside the lease: with no renewal\n"
"confirmed in time, the group gets SIGTERM the grace and a margin (3% of\n"
"--ttl + 10ms) before the lease ends, and SIGKILL the margin before it ends;\n"
"if dlockd says the lock is not held, SIGTERM at once and SIGKILL after the\n"
"grace. What the command leaves running in its group when it exits is\n"
"stopped the same way before the release. An --owner must be unique to each\n"
"run: a second run with a holder's owner id is refused as a conflict.\n"
"\n"
"Exit status: the command's own; 128+N if it was killed by signal N (or dlock\n"
"was, while waiting); 1 (or -E) not acquired within the wait; 64 usage error\n"
"(or dlockd refused a value: 400); 69 dlockd unreachable or failing (5xx) for\n"
"10 s; 74 stdout cannot be written; 75 the lease was lost; 77 dlockd refused\n"
"(401, 403, a name that is another kind of lock, another semaphore limit); 126 COMMAND cannot run, 127\n"
"COMMAND not found. release, renew: 75 if not held. status: 1 if not locked.\n"
"renew takes $DLOCK_TTL_MS (what acquire asked for) unless --ttl is given.\n";

struct opts {
	enum lease_kind kind;
	bool kind_given;
	bool ttl_given;
	bool grace_given;
	const char *server;
	const char *token_file;
	struct client_tls tls;
	const char *owner;
	int64_t wait_ms;	/* -1: until acquired */
	int64_t ttl_ms;
	int64_t grace_ms;
	int conflict_exit;
	bool force;
	bool json;
	int limit;		/* --limit: a semaphore's permits; 0: not given */
	const char *value;	/* --value */
};

static int usage_error(const char *fmt, const char *arg)
{
	fputs("dlock: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (dlock --help for usage)\n", stderr);
	return EXIT_USAGE;
}

/* Parse the options of argv (from argv[1], the subcommand's first); on
 * success *first is the index of the first argument that is not one. */
static int parse_opts(int argc, char **argv, struct opts *o, int *first)
{
	enum { O_TOKEN_FILE = 256, O_FORCE, O_JSON, O_CACERT, O_CERT, O_KEY, O_LIMIT, O_VALUE };
	static const struct option longopts[] = {
		{ "kind", required_argument, NULL, 'k' },
		{ "server", required_argument, NULL, 's' },
		{ "token-file", required_argument, NULL, O_TOKEN_FILE },
		{ "cacert", required_argument, NULL, O_CACERT },
		{ "cert", required_argument, NULL, O_CERT },
		{ "key", required_argument, NULL, O_KEY },
		{ "owner", required_argument, NULL, 'o' },
		{ "wait", required_argument, NULL, 'w' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "ttl", required_argument, NULL, 't' },
		{ "grace", required_argument, NULL, 'g' },
		{ "conflict-exit-code", required_argument, NULL, 'E' },
		{ "force", no_argument, NULL, O_FORCE },
		{ "json", no_argument, NULL, O_JSON },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "value", required_argument, NULL, O_VALUE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:k:s:o:w:nt:g:E:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			if (!args_kind(optarg, &o->kind))
				return usage_error("--kind '%s' is none of lock, fair, read, write, "
						   "semaphore",
						   optarg);
			o->kind_given = true;
			break;
		case 's': o->server = optarg; break;
		case O_TOKEN_FILE: o->token_file = optarg; break;
		case O_CACERT: o->tls.ca_file = optarg; break;
		case O_CERT: o->tls.cert_file = optarg; break;
		case O_KEY: o->tls.key_file = optarg; break;
		case 'o':
			if (!lease_id_ok(optarg, 128))
				return usage_error("--owner '%s' must be 1 to 128 of A-Z a-z 0-9 . _ : -",
						   optarg);
			o->owner = optarg;
			break;
		case 'w':
			if (!args_duration(optarg, &o->wait_ms))
				return usage_error("--wait '%s' is not a duration (500ms, 30s, 5m)",
						   optarg);
			break;
		case 'n': o->wait_ms = 0; break;
		case 't':
			if (!args_duration(optarg, &o->ttl_ms) || o->ttl_ms < 300)
				return usage_error("--ttl '%s' is not a duration of 300ms or more",
						   optarg);
			o->ttl_given = true;
			break;
		case 'g':
			if (!args_duration(optarg, &o->grace_ms))
				return usage_error("--grace '%s' is not a duration (500ms, 5s)",
						   optarg);
			o->grace_given = true;
			break;
		case 'E':
			if (!args_int(optarg, 0, 255, &o->conflict_exit))
				return usage_error("--conflict-exit-code '%s' is not 0..255", optarg);
			break;
		case O_FORCE: o->force = true; break;
		case O_JSON: o->json = true; break;
		case O_LIMIT:
			if (!args_int(optarg, 1, 10000, &o->limit))
				return usage_error("--limit '%s' is not 1..10000", optarg);
			break;
		case O_VALUE:
			if (strlen(optarg) > 1024)
				return usage_error("--value '%.32s...' is longer than 1024 bytes",
						   optarg);
			o->value = optarg;
			break;
		case 'h': fputs(usage_text, stdout); exit(0);
		case ':': return usage_error("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage_error("unknown option '%s'",
						   (char[]){ '-', (char)optopt, '\0' });
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	*first = optind;
	return 0;
}

/* The bearer token: --token-file's first line, else $DLOCK_TOKEN, else
 * none. NULL with *bad set when the file cannot be read. */
static char *read_token(const struct opts *o, bool *bad)
{
	const char *env = getenv("DLOCK_TOKEN");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	*bad = false;
	if (!o->token_file)
		return env && *env ? strdup(env) : NULL;
	f = fopen(o->token_file, "r");
	if (!f) {
		fprintf(stderr, "dlock: --token-file '%s': %m\n", o->token_file);
		*bad = true;
		return NULL;
	}
	n = getline(&line, &cap, f);
	fclose(f);
	while (n > 0 && strchr(" \t\r\n", line[n - 1]))
		line[--n] = '\0';
	if (n <= 0) {
		fprintf(stderr, "dlock: --token-file '%s' has no token on its first line\n",
			o->token_file);
		free(line);
		*bad = true;
		return NULL;
	}
	return line;
}

/* ----- Subcommands ----- */

static int exit_of(enum lease_outcome out, const struct opts *o)
{
	return lease_exit_code(out, o->conflict_exit);
}

/* stdout written out, or 74 with why. */
static int flush_stdout(const char *what)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "dlock: %s: cannot write to stdout: %m\n", what);
		return EXIT_OUTPUT;
	}
	return 0;
}

static int cmd_acquire(struct lease *l, const struct opts *o)
{
	sigset_t old;
	int sigfd = run_signalfd(&old), status;
	enum lease_outcome out;

	if (sigfd < 0)
		return EXIT_UNAVAILABLE;
	out = lease_acquire(l, o->wait_ms, sigfd);
	if (out == LEASE_INTERRUPTED) {
		int sig = run_signal_taken(sigfd);

		lease_say(l, "%s while waiting: gave up", run_signal_name(sig));
		status = 128 + sig;
	} else {
		status = exit_of(out, o);
	}
	close(sigfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (out != LEASE_OK)
		return status;
	printf("DLOCK_NAME='%s'\nDLOCK_KIND='%s'\nDLOCK_OWNER='%s'\n"
	       "DLOCK_FENCING_TOKEN='%lld'\nDLOCK_TTL_MS='%lld'\n"
	       "export DLOCK_NAME DLOCK_KIND DLOCK_OWNER DLOCK_FENCING_TOKEN DLOCK_TTL_MS\n",
	       l->name, lease_kind_name(l->kind), l->owner, l->fencing_token,
	       (long long)l->ttl_ms);
	/* nobody would know the owner: give the lock back */
	if ((status = flush_stdout("acquire")))
		lease_release(l, false, true, false);
	return status;
}

static int cmd_renew(struct lease *l, const struct opts *o)
{
	int64_t sent = mono_ms();
	enum lease_outcome out;
	struct answer a;

	lease_renew_start(l, 10000);
	while (!client_poll(l->client, -1, 1000))
		;
	client_finish(l->client, &a);
	out = lease_renewed(l, &a, sent);
	if (out == LEASE_UNAVAILABLE || out == LEASE_REFUSED || out == LEASE_INVALID)
		lease_say(l, "renewing: dlockd answered %ld %s", a.status,
			  a.status ? answer_message(&a) : a.error);
	answer_release(&a);
	return exit_of(out, o);
}

static int cmd_status(struct lease *l)
{
	static const char *const fmt[] = { "/locks/%s", "/fairlocks/%s", "/rwlocks/%s",
					   "/rwlocks/%s", "/semaphores/%s" };
	char path[300];
	struct answer a;
	int status;

	snprintf(path, sizeof(path), fmt[l->kind], l->name);
	client_call(l->client, "GET", path, 10000, -1, &a);
	if (a.status == 200 && json_is_boolean(json_object_get(a.json, "locked"))) {
		json_dumpf(a.json, stdout, JSON_COMPACT);
		putchar('\n');
		status = json_is_true(json_object_get(a.json, "locked")) ? 0 : 1;
		if (flush_stdout("status"))
			status = EXIT_OUTPUT;
	} else {
		status = a.status == 200 ? EXIT_UNAVAILABLE
					 : lease_exit_code(lease_outcome_of(&a), EXIT_UNAVAILABLE);
		lease_say(l, "status: %s%s", a.status == 200 ? "an answer that is no lock's state"
				: a.status ? "dlockd answered " : "cannot reach dlockd: ",
			  a.status == 200 ? "" : a.status ? answer_message(&a) : a.error);
	}
	answer_release(&a);
	return status;
}

static int cmd_list(struct client *c, const char *prefix, bool as_json)
{
	char *cursor = NULL;
	int status = 0;

	do {
		char path[512];
		struct answer a;
		json_t *lock;
		size_t i;

		snprintf(path, sizeof(path), "/locks?limit=1000&prefix=%s%s%s", prefix,
			 cursor ? "&cursor=" : "", cursor ? cursor : "");
		free(cursor);
		cursor = NULL;
		client_call(c, "GET", path, 10000, -1, &a);
		if (a.status != 200 || !json_is_array(json_object_get(a.json, "locks"))) {
			fprintf(stderr, "dlock: list: %s%s\n",
				a.status == 200 ? "an answer that is no listing"
				: a.status ? "dlockd answered " : "cannot reach dlockd: ",
				a.status == 200 ? "" : a.status ? answer_message(&a) : a.error);
			status = a.status == 200 ? EXIT_UNAVAILABLE
				 : lease_exit_code(lease_outcome_of(&a), EXIT_UNAVAILABLE);
			answer_release(&a);
			break;
		}
		json_array_foreach(json_object_get(a.json, "locks"), i, lock) {
			if (as_json) {
				json_dumpf(lock, stdout, JSON_COMPACT);
				putchar('\n');
			} else {
				puts(json_string_value(json_object_get(lock, "name")));
			}
		}
		if (json_is_string(json_object_get(a.json, "cursor"))) {
			char *escaped = curl_easy_escape(NULL, json_string_value(json_object_get(
								       a.json, "cursor")), 0);

			cursor = escaped ? strdup(escaped) : NULL;
			curl_free(escaped);
		}
		answer_release(&a);
	} while (cursor);
	free(cursor);
	if (!status)
		status = flush_stdout("list");
	return status;
}

int main(int argc, char **argv)
{
	enum { C_RUN, C_ACQUIRE, C_RENEW, C_RELEASE, C_STATUS, C_LIST };
	static const char *const commands[] = { "run", "acquire", "renew", "release", "status",
						"list" };
	struct opts o = { .wait_ms = -1, .ttl_ms = DEFAULT_TTL_MS, .grace_ms = DEFAULT_GRACE_MS,
			  .conflict_exit = EXIT_CONFLICT_DEFAULT };
	struct lease l = { 0 };
	const char *cmd = argc > 1 ? argv[1] : "", *name = NULL, *env_name;
	int first = 0, status, n = -1;
	bool bad_token, dashdash = false;
	char *token;

	bool stdout_closed = fcntl(STDOUT_FILENO, F_GETFD) < 0;

	run_note_inherited();	/* reopens a closed stdout on /dev/null */
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
		printf("dlock %s\n", dlockd_version);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(cmd, commands[i]))
			n = (int)i;
	if (n < 0)
		return usage_error(*cmd ? "unknown command '%s'" : "no command%s", cmd);
	if ((status = parse_opts(argc - 1, argv + 1, &o, &first)))
		return status;
	first++;		/* an index into argv, past the subcommand */

	/* NAME: run, acquire and status need one; renew and release default
	 * to $DLOCK_NAME, and take its owner and kind with it */
	env_name = getenv("DLOCK_NAME");
	if (n != C_LIST && first < argc && strcmp(argv[first], "--"))
		name = argv[first++];
	else if ((n == C_RENEW || n == C_RELEASE) && env_name && *env_name)
		name = env_name;
	if (n != C_LIST && !name)
		return usage_error("%s needs the lock's NAME", cmd);
	if (n != C_LIST && !lease_id_ok(name, 200))
		return usage_error("NAME '%s' must be 1 to 200 of A-Z a-z 0-9 . _ : -", name);
	if ((n == C_RENEW || n == C_RELEASE) && env_name && name && !strcmp(name, env_name)) {
		if (!o.owner && getenv("DLOCK_OWNER") && lease_id_ok(getenv("DLOCK_OWNER"), 128))
			o.owner = getenv("DLOCK_OWNER");
		if (!o.kind_given && getenv("DLOCK_KIND"))
			args_kind(getenv("DLOCK_KIND"), &o.kind);
		/* renew with the lease acquire asked for */
		if (!o.ttl_given && getenv("DLOCK_TTL_MS") &&
		    args_duration_ms(getenv("DLOCK_TTL_MS"), &o.ttl_ms) && o.ttl_ms < 300)
			o.ttl_ms = 300;
	}
	if ((n == C_RENEW || (n == C_RELEASE && !o.force)) && !o.owner)
		return usage_error("%s needs --owner (or $DLOCK_OWNER with $DLOCK_NAME)", cmd);
	/* --limit makes it a semaphore, which an acquire must give its limit */
	if (o.limit && o.kind_given && o.kind != KIND_SEMAPHORE)
		return usage_error("--limit is for semaphores, not --kind %s",
				   lease_kind_name(o.kind));
	if (o.limit)
		o.kind = KIND_SEMAPHORE;
	if ((n == C_RUN || n == C_ACQUIRE) && o.kind == KIND_SEMAPHORE && !o.limit)
		return usage_error("%s of a semaphore needs --limit N", cmd);
	if (n == C_RUN) {
		if (first < argc && !strcmp(argv[first], "--")) {
			first++;
			dashdash = true;
		}
		if (first >= argc)
			return usage_error("run needs a COMMAND after NAME%s", "");
		if (!dashdash && argv[first][0] == '-')
			return usage_error("'%s' after NAME: options go before NAME", argv[first]);
		/* the stop comes inside the lease: the grace must leave room */
		if (!o.grace_given) {
			o.grace_ms = args_grace_default(o.ttl_ms, o.grace_ms);
		} else if (!args_grace_fits(o.ttl_ms, o.grace_ms)) {
			fprintf(stderr, "dlock: --grace %lldms is more than half of --ttl %lldms: "
				"the command gets SIGTERM a grace before its lease ends, so the "
				"grace may be at most %lldms (dlock --help for usage)\n",
				(long long)o.grace_ms, (long long)o.ttl_ms,
				(long long)(o.ttl_ms / 2));
			return EXIT_USAGE;
		}
	} else if (n == C_LIST ? argc - first > 1 : first < argc) {
		return usage_error("unexpected argument '%s'", argv[n == C_LIST ? first + 1 : first]);
	}
	if (n == C_LIST && first < argc && *argv[first] && !lease_id_ok(argv[first], 200))
		return usage_error("PREFIX '%s' must be of A-Z a-z 0-9 . _ : -", argv[first]);

	if (n == C_ACQUIRE && stdout_closed) {
		fputs("dlock: acquire: stdout is closed: nobody would learn the owner id\n", stderr);
		return EXIT_OUTPUT;
	}
	if (!o.server)
		o.server = getenv("DLOCK_SERVER") && *getenv("DLOCK_SERVER") ? getenv("DLOCK_SERVER")
									       : DEFAULT_SERVER;
	if (!o.tls.ca_file && getenv("DLOCK_CACERT") && *getenv("DLOCK_CACERT"))
		o.tls.ca_file = getenv("DLOCK_CACERT");
	if (!o.tls.cert_file && getenv("DLOCK_CERT") && *getenv("DLOCK_CERT"))
		o.tls.cert_file = getenv("DLOCK_CERT");
	if (!o.tls.key_file && getenv("DLOCK_KEY") && *getenv("DLOCK_KEY"))
		o.tls.key_file = getenv("DLOCK_KEY");
	if (!o.tls.cert_file != !o.tls.key_file)
		return usage_error("--cert and --key go together%s", "");
	token = read_token(&o, &bad_token);
	if (bad_token)
		return EXIT_USAGE;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	l.client = client_create(o.server, token, &o.tls);
	free(token);
	if (!l.client) {
		fputs("dlock: cannot set up libcurl\n", stderr);
		return EXIT_UNAVAILABLE;
	}
	l.kind = o.kind;
	l.name = name;
	l.ttl_ms = o.ttl_ms;
	l.limit = o.limit;
	l.value = o.value;
	l.owner_given = o.owner != NULL;
	if (o.owner)
		snprintf(l.owner, sizeof(l.owner), "%s", o.owner);
	else
		lease_make_owner(l.owner);

	switch (n) {
	case C_RUN: {
		struct run_opts ro = { .wait_ms = o.wait_ms, .grace_ms = o.grace_ms,
				       .conflict_exit = o.conflict_exit };

		status = run_command(&l, &ro, argv + first);
		break;
	}
	case C_ACQUIRE: status = cmd_acquire(&l, &o); break;
	case C_RENEW: status = cmd_renew(&l, &o); break;
	case C_RELEASE: status = exit_of(lease_release(&l, o.force, false, true), &o); break;
	case C_STATUS: status = cmd_status(&l); break;
	default: status = cmd_list(l.client, first < argc ? argv[first] : "", o.json); break;
	}
	client_free(l.client);
	curl_global_cleanup();
	return status;
}
