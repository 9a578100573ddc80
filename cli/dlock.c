/* dlock.c -- the command-line client of dlockd, for shell scripts: `dlock
 * run NAME -- COMMAND` runs a command while holding a lock (run.c), and
 * acquire, renew, release, status and list manage or read a lock across a
 * script's steps. Options, subcommands and exit codes; the lock's requests
 * are in lease.c. */
#include <curl/curl.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/base/version.h"
#include "args.h"
#include "lease.h"
#include "run.h"
#include "session.h"

#define DEFAULT_SERVER "http://127.0.0.1:8080"
#define DEFAULT_TTL_MS 15000
#define DEFAULT_GRACE_MS 5000

static const char usage_text[] =
"usage: dlock run [options] NAME [--] COMMAND [ARGS...]\n"
"       dlock run [options] NAME -c 'SHELL COMMAND'   (as flock -c: with sh -c)\n"
"       dlock run [options] NAME,NAME... [--] COMMAND   several locks, all or none\n"
"       dlock acquire [options] NAME      print DLOCK_* assignments for eval\n"
"       dlock renew [options] [NAME]      renew the lease (a heartbeat)\n"
"       dlock release [options] [NAME]    release one hold (--force: whoever holds it)\n"
"       dlock status [options] NAME       the lock's state as JSON; exit 0 if locked\n"
"       dlock list [options] [PREFIX]     the locks held: a table (-o json, -o name)\n"
"\n"
"Options (before NAME; before the subcommand too, as in dlock -s URL run ...):\n"
"  -k, --kind KIND        lock (default), fairlock, rwlock or semaphore (old\n"
"                         spellings fair, read and write are still taken;\n"
"                         flock -s: --kind rwlock --mode read)\n"
"  -m, --mode MODE        rwlock: read or write (default write)\n"
"      --limit N          one of N permits of semaphore NAME (1..10000; sets\n"
"                         --kind semaphore; every user of NAME gives the same N)\n"
"      --value TEXT       the holder value kept with the holding (UTF-8, at most\n"
"                         1024 bytes): status and watchers see it\n"
"  -s, --server URL       dlockd's http:// or https:// URL (default $DLOCKD_URL,\n"
"                         else " DEFAULT_SERVER "; old alias $DLOCK_SERVER)\n"
"      --token-file FILE  read the bearer token from FILE's first line (default\n"
"                         $DLOCKD_TOKEN_FILE, a path; else $DLOCKD_TOKEN, the\n"
"                         token itself, old alias $DLOCK_TOKEN; never put a\n"
"                         token on the command line, which ps shows)\n"
"      --cacert FILE      for https://: the CA to trust (default $DLOCK_CACERT,\n"
"                         else the system's)\n"
"      --cert FILE, --key FILE\n"
"                         for https:// with mutual TLS: the client certificate\n"
"                         and its key (default $DLOCK_CERT, $DLOCK_KEY)\n"
"  -o, --owner ID         the owner id (default: unique to this run; renew and\n"
"                         release take $DLOCK_OWNER when NAME is $DLOCK_NAME)\n"
"  -w, --wait, --timeout DURATION\n"
"                         wait this long for the lock (default: until acquired)\n"
"  -n, --no-wait, --nonblock\n"
"                         do not wait: fail at once if it is held\n"
"  -c, --command CMD      run: run CMD with sh -c, instead of COMMAND [ARGS...]\n"
"  -v, --verbose          say when the lock is acquired (after how long) and\n"
"                         released\n"
"  -t, --ttl DURATION     the lease (default 15s)\n"
"  -g, --grace DURATION   run: SIGTERM to SIGKILL, both inside the lease (default\n"
"                         5s, or a third of --ttl if less; at most half of --ttl)\n"
"  -E, --conflict-exit-code N\n"
"                         exit status when not acquired in time (default 1)\n"
"      --force            release: free the lock whoever holds it (an admin's)\n"
"  -o, --output FORMAT    list (where -o is no owner): table (default: name, kind,\n"
"                         holders, lease left, waiting), json (one listing entry\n"
"                         a line, as dlockd gives it; also --json) or name (one\n"
"                         name a line)\n"
"  -h, --help             print this text\n"
"  -V, --version          print dlock's version\n"
"\n"
"Durations: 500ms, 30s, 5m, 1h; a bare number is seconds.\n"
"\n"
"dlock run runs COMMAND (no shell) in a process group of its own with\n"
"DLOCK_NAME, DLOCK_KIND, DLOCK_MODE (rwlock), DLOCK_OWNER and\n"
"DLOCK_FENCING_TOKEN in its environment, forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and\n"
"SIGALRM to the group, stops it with dlock on Ctrl-Z, and releases the lock\n"
"when it ends. The command never runs outside the lease: with no renewal\n"
"confirmed in time, the group gets SIGTERM the grace and a margin (3% of\n"
"--ttl + 10ms) before the lease ends, and SIGKILL the margin before it ends;\n"
"if dlockd says the lock is not held, SIGTERM at once and SIGKILL after the\n"
"grace. dlock watches the lock and renews the moment its state changes, so a\n"
"forced release stops the command within a round trip. What the command\n"
"leaves running in its group when it exits is\n"
"stopped the same way before the release. An --owner must be unique to each\n"
"run: a second run with a holder's owner id is refused as a conflict.\n"
"\n"
"dlock run a,b,c takes the locks a, b and c all or none (of --kind, each\n"
"of --limit), through one session of dlockd whose id is DLOCK_OWNER and\n"
"DLOCK_SESSION: it waits holding none of them, so runs over overlapping\n"
"names never deadlock (a session that ends while it waits, dlockd or Redis\n"
"stalled past --ttl, is made again and the wait goes on); one heartbeat\n"
"renews them all (every third of the lease: one forced free is known then,\n"
"they are not watched); losing any is losing the lease.\n"
"DLOCK_FENCING_TOKENS is name=token,... for each,\n"
"DLOCK_FENCING_TOKEN the first name's. --owner is not taken with them.\n"
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
	const char *mode;	/* --mode, applied once every option is read */
	bool ttl_given;
	bool grace_given;
	const char *server;
	const char *token_file;
	const char *command;	/* -c: run it with sh -c */
	bool verbose;
	struct client_tls tls;
	const char *owner;
	int64_t wait_ms;	/* -1: until acquired */
	int64_t ttl_ms;
	int64_t grace_ms;
	int conflict_exit;
	bool force;
	bool listing;		/* the subcommand is list: -o is --output */
	enum list_output { OUT_TABLE, OUT_JSON, OUT_NAME } output;
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
	enum { O_TOKEN_FILE = 256, O_FORCE, O_JSON, O_CACERT, O_CERT, O_KEY, O_OUTPUT, O_LIMIT,
	       O_VALUE };
	/* flock's names where they mean the same: --timeout, --nonblock,
	 * -c/--command, -v/--verbose */
	static const struct option longopts[] = {
		{ "kind", required_argument, NULL, 'k' },
		{ "mode", required_argument, NULL, 'm' },
		{ "server", required_argument, NULL, 's' },
		{ "token-file", required_argument, NULL, O_TOKEN_FILE },
		{ "cacert", required_argument, NULL, O_CACERT },
		{ "cert", required_argument, NULL, O_CERT },
		{ "key", required_argument, NULL, O_KEY },
		{ "owner", required_argument, NULL, 'o' },
		{ "wait", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 'w' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "nonblock", no_argument, NULL, 'n' },
		{ "command", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "ttl", required_argument, NULL, 't' },
		{ "grace", required_argument, NULL, 'g' },
		{ "conflict-exit-code", required_argument, NULL, 'E' },
		{ "force", no_argument, NULL, O_FORCE },
		{ "json", no_argument, NULL, O_JSON },
		{ "output", required_argument, NULL, O_OUTPUT },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "value", required_argument, NULL, O_VALUE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	optind = 0;		/* getopt anew: this runs twice, before and after the subcommand */
	while ((c = getopt_long(argc, argv, "+:k:m:s:o:w:nt:g:E:c:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			if (!args_kind(optarg, &o->kind))
				return usage_error("--kind '%s' is none of lock, fairlock, rwlock, "
						   "semaphore",
						   optarg);
			o->kind_given = true;
			break;
		case 'm': o->mode = optarg; break;
		case 's':
			if (!args_server_ok(optarg)) {
				fprintf(stderr, "dlock: --server '%s' is not an http:// or https:// "
					"URL (flock's -s, --shared, is --kind rwlock --mode read in dlock; dlock "
					"--help for usage)\n", optarg);
				return EXIT_USAGE;
			}
			o->server = optarg;
			break;
		case 'c': o->command = optarg; break;
		case 'v': o->verbose = true; break;
		case 'V': printf("dlock %s\n", dlockd_version); exit(0);
		case O_TOKEN_FILE: o->token_file = optarg; break;
		case O_CACERT: o->tls.ca_file = optarg; break;
		case O_CERT: o->tls.cert_file = optarg; break;
		case O_KEY: o->tls.key_file = optarg; break;
		case 'o':
			if (o->listing)
				goto output;
			if (!lease_id_ok(optarg, 128))
				return usage_error("--owner '%s' must be 1 to 128 of A-Z a-z 0-9 . _ : -",
						   optarg);
			o->owner = optarg;
			break;
		case 'w':
			if (!args_duration(optarg, &o->wait_ms))
				return usage_error("--wait/--timeout '%s' is not a duration (500ms, "
						   "30s, 5m; a bare number is seconds)", optarg);
			break;
		case 'n': o->wait_ms = 0; break;
		case 't':
			if (!args_duration(optarg, &o->ttl_ms) || o->ttl_ms < 300)
				return usage_error("--ttl '%s' is not a duration from 300ms to "
						   "24 days (500ms, 30s, 5m)", optarg);
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
		case O_JSON: o->output = OUT_JSON; break;
		case O_OUTPUT:
		output:
			if (!o->listing)
				return usage_error("%s is list's option", "--output");
			if (!strcmp(optarg, "table"))
				o->output = OUT_TABLE;
			else if (!strcmp(optarg, "json"))
				o->output = OUT_JSON;
			else if (!strcmp(optarg, "name"))
				o->output = OUT_NAME;
			else
				return usage_error("--output '%s' is none of table, json, name",
						   optarg);
			break;
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
	if (o->mode && !lease_mode_name(o->kind))
		return usage_error("--mode '%s' is for --kind rwlock only", o->mode);
	if (o->mode && !args_mode(o->mode, &o->kind))
		return usage_error("--mode '%s' is neither read nor write", o->mode);
	*first = optind;
	return 0;
}

/* The bearer token: the first line of --token-file, else of
 * $DLOCKD_TOKEN_FILE; else $DLOCKD_TOKEN (or its old alias $DLOCK_TOKEN);
 * else none. NULL with *bad set when the file cannot be read. */
static char *read_token(const struct opts *o, bool *bad)
{
	static const char *const file_env[] = { "DLOCKD_TOKEN_FILE", NULL };
	static const char *const token_env[] = { "DLOCKD_TOKEN", "DLOCK_TOKEN", NULL };
	const char *env = args_env(token_env, NULL), *path = o->token_file;
	const char *from = "--token-file";
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	*bad = false;
	if (!path && (path = args_env(file_env, NULL)))
		from = file_env[0];
	if (!path)
		return env ? strdup(env) : NULL;
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "dlock: %s '%s': %m\n", from, path);
		*bad = true;
		return NULL;
	}
	n = getline(&line, &cap, f);
	fclose(f);
	while (n > 0 && strchr(" \t\r\n", line[n - 1]))
		line[--n] = '\0';
	if (n <= 0) {
		fprintf(stderr, "dlock: %s '%s' has no token on its first line\n", from, path);
		free(line);
		*bad = true;
		return NULL;
	}
	return line;
}

/* `dlock run a,b,c`: the names of list, each valid and given once, into
 * *names (free() it and its first string, which holds them all). */
static int split_names(const char *list, const struct opts *o, char ***names, size_t *n)
{
	size_t cap = 1;
	char *copy, *rest, *p;

	if (o->owner)
		return usage_error("--owner '%s' is not for several names: their owner is "
				   "the session dlock makes", o->owner);
	for (p = (char *)list; *p; p++)
		cap += *p == ',';
	if (cap > 64)
		return usage_error("'%.64s...': at most 64 names at once", list);
	*n = 0;
	*names = calloc(cap, sizeof(**names));
	rest = copy = strdup(list);
	if (!*names || !copy) {
		free(*names);
		free(copy);
		*names = NULL;
		return EXIT_UNAVAILABLE;
	}
	while ((p = strsep(&rest, ","))) {
		int bad = 0;

		if (!lease_id_ok(p, 200))
			bad = usage_error("NAME '%s' in the list must be 1 to 200 of A-Z a-z 0-9 . _ : -",
					  p);
		for (size_t i = 0; !bad && i < *n; i++)
			if (!strcmp((*names)[i], p))
				bad = usage_error("NAME '%s' is given twice", p);
		if (bad) {
			free(copy);
			free(*names);
			*names = NULL;
			return bad;
		}
		(*names)[(*n)++] = p;
	}
	return 0;
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
	printf("DLOCK_NAME='%s'\nDLOCK_KIND='%s'\nDLOCK_MODE='%s'\nDLOCK_OWNER='%s'\n"
	       "DLOCK_FENCING_TOKEN='%lld'\nDLOCK_TTL_MS='%lld'\n"
	       "export DLOCK_NAME DLOCK_KIND DLOCK_MODE DLOCK_OWNER DLOCK_FENCING_TOKEN "
	       "DLOCK_TTL_MS\n",
	       l->name, lease_kind_name(l->kind),
	       lease_mode_name(l->kind) ? lease_mode_name(l->kind) : "", l->owner,
	       l->fencing_token, (long long)l->ttl_ms);
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
	char path[300];
	struct answer a;
	int status;

	lease_status_path(l, path, sizeof(path));
	client_call(l->client, "GET", path, NULL, 10000, -1, &a);
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

/* ----- list's table ----- */

/* A listing entry's cells: name, kind, holders, lease left, waiting. */
struct list_row {
	char *cell[5];
};

static char *fmt_dup(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_dup(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* "worker-1", "reader-1 (read)", "worker-1 x2", "(hidden)" where the
 * token may not see the owner; comma-separated. */
static char *holders_cell(json_t *holders)
{
	char *out = strdup(""), *next;
	json_t *h;
	size_t i;

	json_array_foreach(holders, i, h) {
		const char *owner = json_string_value(json_object_get(h, "owner"));
		const char *mode = json_string_value(json_object_get(h, "mode"));
		json_int_t holds = json_integer_value(json_object_get(h, "holds"));
		char extra[48] = "";

		if (holds > 1)
			snprintf(extra, sizeof(extra), " x%lld", (long long)holds);
		next = fmt_dup("%s%s%s%s%s%s%s", out ? out : "", i ? ", " : "",
			       owner ? owner : "(hidden)", mode ? " (" : "", mode ? mode : "",
			       mode ? ")" : "", extra);
		free(out);
		out = next;
	}
	return out && *out ? out : (free(out), strdup("-"));
}

/* 850ms, 59.7s, 4m57s, 1h02m */
static char *lease_cell(json_t *ttl)
{
	long long ms = json_integer_value(ttl);

	if (!json_is_integer(ttl))
		return strdup("-");
	if (ms < 1000)
		return fmt_dup("%lldms", ms);
	if (ms < 60000)
		return fmt_dup("%lld.%llds", ms / 1000, ms % 1000 / 100);
	if (ms < 3600000)
		return fmt_dup("%lldm%02llds", ms / 60000, ms / 1000 % 60);
	return fmt_dup("%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
}

/* How many wait for the lock: its status' queue_length, read where its
 * kind lives (a kind is the singular of its path; the listing's `lock` is
 * read as a fair lock, which a plain lock also answers, with no queue);
 * "-" for a kind without a queue, "?" when the status cannot be read. */
static char *waiting_cell(struct client *c, const char *kind, const char *name)
{
	char path[300];
	struct answer a;
	json_t *q;
	char *out;

	if (!strcmp(kind, "rwlock"))
		return strdup("-");
	snprintf(path, sizeof(path), "/%ss/%s", strcmp(kind, "lock") ? kind : "fairlock", name);
	client_call(c, "GET", path, NULL, 10000, -1, &a);
	q = a.status == 200 ? json_object_get(a.json, "queue_length") : NULL;
	out = a.status != 200 ? strdup("?") : json_is_integer(q)
		? fmt_dup("%lld", (long long)json_integer_value(q)) : strdup("-");
	answer_release(&a);
	return out;
}

static int row_cmp(const void *a, const void *b)
{
	const struct list_row *x = a, *y = b;
	int c = strcmp(x->cell[0], y->cell[0]);

	return c ? c : strcmp(x->cell[1], y->cell[1]);
}

/* The rows in name order, under a header, each column as wide as its
 * widest cell (lease and waiting right-aligned). */
static void print_table(struct list_row *rows, size_t n)
{
	static const char *const head[5] = { "NAME", "KIND", "HOLDERS", "LEASE", "WAITING" };
	int w[5];

	qsort(rows, n, sizeof(*rows), row_cmp);
	for (int k = 0; k < 5; k++) {
		w[k] = (int)strlen(head[k]);
		for (size_t i = 0; i < n; i++)
			if ((int)strlen(rows[i].cell[k]) > w[k])
				w[k] = (int)strlen(rows[i].cell[k]);
	}
	printf("%-*s  %-*s  %-*s  %*s  %*s\n", w[0], head[0], w[1], head[1], w[2], head[2],
	       w[3], head[3], w[4], head[4]);
	for (size_t i = 0; i < n; i++)
		printf("%-*s  %-*s  %-*s  %*s  %*s\n", w[0], rows[i].cell[0], w[1], rows[i].cell[1],
		       w[2], rows[i].cell[2], w[3], rows[i].cell[3], w[4], rows[i].cell[4]);
}

static int cmd_list(struct client *c, const char *prefix, enum list_output output)
{
	struct list_row *rows = NULL;
	size_t nrows = 0;
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
		client_call(c, "GET", path, NULL, 10000, -1, &a);
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
			const char *name = json_string_value(json_object_get(lock, "name"));
			const char *kind = json_string_value(json_object_get(lock, "kind"));

			if (output == OUT_JSON) {
				json_dumpf(lock, stdout, JSON_COMPACT);
				putchar('\n');
			} else if (output == OUT_NAME) {
				puts(name ? name : "");
			} else if (name && kind) {
				struct list_row *r;

				rows = realloc(rows, (nrows + 1) * sizeof(*rows));
				if (!rows) {
					fputs("dlock: list: out of memory\n", stderr);
					exit(EXIT_UNAVAILABLE);
				}
				r = &rows[nrows++];
				r->cell[0] = strdup(name);
				r->cell[1] = strdup(kind);
				r->cell[2] = holders_cell(json_object_get(lock, "holders"));
				r->cell[3] = lease_cell(json_object_get(lock, "ttl_ms"));
				r->cell[4] = waiting_cell(c, kind, name);
				for (int k = 0; k < 5; k++)
					if (!r->cell[k]) {
						fputs("dlock: list: out of memory\n", stderr);
						exit(EXIT_UNAVAILABLE);
					}
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
	if (!status && output == OUT_TABLE)
		print_table(rows, nrows);
	for (size_t i = 0; i < nrows; i++)
		for (int k = 0; k < 5; k++)
			free(rows[i].cell[k]);
	free(rows);
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
	static const char *const server_env[] = { "DLOCKD_URL", "DLOCK_SERVER", NULL };
	struct lease l = { 0 };
	const char *cmd, *name = NULL, *env_name, *server_from = "--server";
	char **names = NULL;
	size_t n_names = 0;
	char *sh_argv[] = { (char *)"sh", (char *)"-c", NULL, NULL }, **command;
	int first = 0, status, n = -1, at = 1;
	bool bad_token, dashdash = false;
	char *token;

	bool stdout_closed = fcntl(STDOUT_FILENO, F_GETFD) < 0;

	run_note_inherited();	/* reopens a closed stdout on /dev/null */
	/* options before the subcommand: dlock -s URL run ... */
	if (argc > 1 && argv[1][0] == '-' && strcmp(argv[1], "-") &&
	    (status = parse_opts(argc, argv, &o, &at)))
		return status;
	cmd = at < argc ? argv[at] : "";
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
	o.listing = n == C_LIST;
	if ((status = parse_opts(argc - at, argv + at, &o, &first)))
		return status;
	first += at;		/* an index into argv, past the subcommand */

	/* NAME: run, acquire and status need one; renew and release default
	 * to $DLOCK_NAME, and take its owner and kind with it */
	env_name = getenv("DLOCK_NAME");
	if (n != C_LIST && first < argc && strcmp(argv[first], "--"))
		name = argv[first++];
	else if ((n == C_RENEW || n == C_RELEASE) && env_name && *env_name)
		name = env_name;
	if (n != C_LIST && !name)
		return usage_error("%s needs the lock's NAME", cmd);
	if (n == C_RUN && name && strchr(name, ',')) {
		if ((status = split_names(name, &o, &names, &n_names)))
			return status;
	} else if (n != C_LIST && name && strchr(name, ',')) {
		return usage_error("several names ('%s') are for dlock run", name);
	} else if (n != C_LIST && !lease_id_ok(name, 200)) {
		return usage_error("NAME '%s' must be 1 to 200 of A-Z a-z 0-9 . _ : -", name);
	}
	if ((n == C_RENEW || n == C_RELEASE) && env_name && name && !strcmp(name, env_name)) {
		if (!o.owner && getenv("DLOCK_OWNER") && lease_id_ok(getenv("DLOCK_OWNER"), 128))
			o.owner = getenv("DLOCK_OWNER");
		if (!o.kind_given && getenv("DLOCK_KIND") && args_kind(getenv("DLOCK_KIND"), &o.kind) &&
		    lease_mode_name(o.kind) && getenv("DLOCK_MODE"))
			args_mode(getenv("DLOCK_MODE"), &o.kind);
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
		/* flock's order: NAME -c 'COMMAND' */
		if (first + 1 < argc && (!strcmp(argv[first], "-c") ||
					 !strcmp(argv[first], "--command"))) {
			if (o.command)
				return usage_error("-c given twice%s", "");
			o.command = argv[first + 1];
			first += 2;
		}
		if (o.command && first < argc)
			return usage_error("-c CMD and a COMMAND ('%s'): give one of them",
					   argv[first]);
		if (first < argc && !strcmp(argv[first], "--")) {
			first++;
			dashdash = true;
		}
		if (first >= argc && !o.command)
			return usage_error("run needs a COMMAND after NAME (or -c 'CMD')%s", "");
		if (!o.command && !dashdash && argv[first][0] == '-')
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
	} else if (o.command) {
		return usage_error("-c is for run, not %s", cmd);
	} else if (n == C_LIST ? argc - first > 1 : first < argc) {
		return usage_error("unexpected argument '%s'", argv[n == C_LIST ? first + 1 : first]);
	}
	if (n == C_LIST && first < argc && *argv[first] && !lease_id_ok(argv[first], 200))
		return usage_error("PREFIX '%s' must be of A-Z a-z 0-9 . _ : -", argv[first]);

	if (n == C_ACQUIRE && stdout_closed) {
		fputs("dlock: acquire: stdout is closed: nobody would learn the owner id\n", stderr);
		return EXIT_OUTPUT;
	}
	if (!o.server && !(o.server = args_env(server_env, &server_from)))
		o.server = DEFAULT_SERVER;
	if (!args_server_ok(o.server)) {	/* --server is checked as it is parsed */
		fprintf(stderr, "dlock: %s '%s' is not an http:// or https:// URL (dlock --help "
			"for usage)\n", server_from, o.server);
		return EXIT_USAGE;
	}
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
	l.names = names;
	l.n_names = n_names;
	l.ops = names ? &session_lease_ops : NULL;
	l.ttl_ms = o.ttl_ms;
	l.verbose = o.verbose;
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

		sh_argv[2] = (char *)o.command;
		command = o.command ? sh_argv : argv + first;
		status = run_command(&l, &ro, command);
		break;
	}
	case C_ACQUIRE: status = cmd_acquire(&l, &o); break;
	case C_RENEW: status = cmd_renew(&l, &o); break;
	case C_RELEASE: status = exit_of(lease_release(&l, o.force, false, true), &o); break;
	case C_STATUS: status = cmd_status(&l); break;
	default: status = cmd_list(l.client, first < argc ? argv[first] : "", o.output); break;
	}
	client_free(l.client);
	curl_global_cleanup();
	free(l.fencing_tokens);
	if (names)
		free(names[0]);
	free(names);
	return status;
}
