/* auth.c -- the token table of --auth-file. It is parsed whole into a new
 * table and swapped in under a write lock, so a reload (SIGHUP, or the file
 * changed on disk) with a bad file changes nothing and requests never see
 * half a table. A change on disk is seen by stat(2) of the path
 * (file_look.c), which follows symlinks. Lookups take the read lock and
 * compare the presented token with every entry in
 * constant time, without an early exit, so timing tells nothing about
 * which bytes were right. Each token is listed once and has a name (its
 * principal), unique in the file, which the lock operations bind holdings to. Tokens never reach
 * the log; names may. */
#include "api/auth.h"

#include "service/base/file_look.h"
#include "service/base/log.h"
#include "service/base/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct token {
	char *secret;
	size_t len;
	enum auth_role role;
	char *prefix;		/* "" = every name */
	char name[AUTH_NAME_MAX + 1];
};

struct table {
	struct token *v;
	size_t n;
};

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct table tokens;
static char *file_path;		/* NULL: auth off */

/* The file as it looked when it was last read, or found unreadable;
 * touched by the main thread only. */
static struct file_look last_look;

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		/* scrub the secret before giving the memory back */
		memset(t->v[i].secret, 0, t->v[i].len);
		free(t->v[i].secret);
		free(t->v[i].prefix);
	}
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

/* A token name's rules: 1..AUTH_NAME_MAX of A-Z a-z 0-9 . _ - */
static bool name_ok(const char *s)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");

	return n > 0 && n <= AUTH_NAME_MAX && s[n] == '\0';
}

/* Parse path into t; on error write "path:line: why" into why. */
static int table_read(const char *path, struct table *t, char *why, size_t why_len)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int lineno = 0;

	memset(t, 0, sizeof(*t));
	if (!f) {
		snprintf(why, why_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *fields[5], *save = NULL, *hash = strchr(line, '#');
		int nf = 0;

		lineno++;
		if (hash)
			*hash = '\0';
		for (char *tok = strtok_r(line, " \t\r\n", &save); tok && nf < 5;
		     tok = strtok_r(NULL, " \t\r\n", &save))
			fields[nf++] = tok;
		if (nf == 0)
			continue;
		if (nf == 3) {
			snprintf(why, why_len, "%s:%d: the token needs a name (a 4th field: "
				 "'<token> <role> <prefix> <name>')", path, lineno);
			goto fail;
		}
		if (nf != 4) {
			snprintf(why, why_len, "%s:%d: want '<token> <role> <prefix> <name>'", path,
				 lineno);
			goto fail;
		}
		if (strcmp(fields[1], "client") && strcmp(fields[1], "admin")) {
			snprintf(why, why_len, "%s:%d: role '%.32s' is not client or admin", path,
				 lineno, fields[1]);
			goto fail;
		}
		if (!name_ok(fields[3])) {
			snprintf(why, why_len, "%s:%d: name '%.64s' must be 1 to %d of "
				 "A-Z a-z 0-9 . _ -", path, lineno, fields[3], AUTH_NAME_MAX);
			goto fail;
		}
		for (size_t i = 0; i < t->n; i++) {
			if (!strcmp(t->v[i].name, fields[3])) {
				snprintf(why, why_len, "%s:%d: name '%s' is given to another "
					 "token already", path, lineno, fields[3]);
				goto fail;
			}
			/* a token listed twice would take the rights of whichever
			 * line came last: refused, naming the lines, never the token */
			if (!strcmp(t->v[i].secret, fields[0])) {
				snprintf(why, why_len, "%s:%d: this token is the same as the one "
					 "named '%s' (each token must be listed once)", path,
					 lineno, t->v[i].name);
				goto fail;
			}
		}
		t->v = xrealloc(t->v, (t->n + 1) * sizeof(*t->v));
		t->v[t->n] = (struct token){
			.secret = xstrdup(fields[0]),
			.len = strlen(fields[0]),
			.role = strcmp(fields[1], "admin") ? AUTH_CLIENT : AUTH_ADMIN,
			.prefix = xstrdup(strcmp(fields[2], "*") ? fields[2] : ""),
		};
		strcpy(t->v[t->n++].name, fields[3]);
	}
	fclose(f);
	if (t->n == 0) {
		snprintf(why, why_len, "%s: no tokens (auth would refuse everyone)", path);
		return -1;
	}
	return 0;
fail:
	fclose(f);
	table_free(t);
	return -1;
}

int auth_load(const char *path)
{
	char why[512];
	struct table t;

	if (!path || !*path)
		return 0;
	last_look = file_look_at(path);	/* before reading: a change meanwhile is seen */
	if (table_read(path, &t, why, sizeof(why)) < 0) {
		fprintf(stderr, "dlockd: auth file %s\n", why);
		return -1;
	}
	file_path = xstrdup(path);
	tokens = t;
	return 0;
}

/* Read the file again (trigger says why, for the log), looked at as l. */
static int table_reload(const struct file_look *l, const char *trigger)
{
	char why[512];
	struct table t, old;

	last_look = *l;
	if (table_read(file_path, &t, why, sizeof(why)) < 0) {
		log_error("auth file not reloaded (%s), keeping the old tokens: %s", trigger, why);
		return -1;
	}
	pthread_rwlock_wrlock(&table_lock);
	old = tokens;
	tokens = t;
	pthread_rwlock_unlock(&table_lock);
	table_free(&old);
	log_info("auth file %s reloaded (%s): %zu tokens", file_path, trigger, t.n);
	return 0;
}

int auth_reload(void)
{
	struct file_look l;

	if (!file_path)
		return 0;
	l = file_look_at(file_path);
	return table_reload(&l, "SIGHUP");
}

int auth_reload_if_changed(void)
{
	struct file_look l;

	if (!file_path)
		return 0;
	l = file_look_at(file_path);
	if (file_look_same(&l, &last_look))
		return 0;
	return table_reload(&l, "it changed on disk");
}

bool auth_enabled(void)
{
	return file_path != NULL;
}

/* 1 when a (alen) equals b (blen); the time depends on blen only. */
static int same(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char diff = alen != blen;

	for (size_t i = 0; i < blen; i++)
		diff |= (unsigned char)(a[alen ? i % alen : 0] ^ b[i]);
	return alen > 0 && diff == 0;
}

enum auth_result auth_check(const char *token, size_t len, const char *name,
			    enum auth_role *role, char principal[AUTH_NAME_MAX + 1])
{
	enum auth_result res = AUTH_UNKNOWN;
	const struct token *hit = NULL;

	pthread_rwlock_rdlock(&table_lock);
	for (size_t i = 0; i < tokens.n; i++)
		if (same(token, len, tokens.v[i].secret, tokens.v[i].len))
			hit = &tokens.v[i];
	if (hit) {
		*role = hit->role;
		memcpy(principal, hit->name, sizeof(hit->name));
		res = !strncmp(name, hit->prefix, strlen(hit->prefix)) ? AUTH_OK : AUTH_OUT_OF_SCOPE;
	}
	pthread_rwlock_unlock(&table_lock);
	return res;
}

void auth_release(void)
{
	table_free(&tokens);
	free(file_path);
	file_path = NULL;
}
