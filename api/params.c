/* params.c -- what a request asks for: the lock name and owner validators
 * of the README's contract, and its parameters from a JSON body or the
 * query string (never both), each checked for type and range before
 * anything touches Redis. Messages name the parameter and the value, git style. */
#include "api/params.h"

#include "api/reply.h"
#include "api/request.h"
#include "service/base/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----- Validators ----- */

/* Quote at most 64 bytes of s for a message; the JSON encoder escapes the rest. */
static int check_id(const char *what, const char *s, size_t len, size_t max,
		    char *why, size_t why_len)
{
	int shown = len > 64 ? 64 : (int)len;

	if (len == 0 || len > max) {
		snprintf(why, why_len, "%s must be 1 to %zu characters long, got %zu",
			 what, max, len);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (!locks_id_char((unsigned char)s[i])) {
			snprintf(why, why_len, "%s '%.*s%s' may only contain A-Z a-z 0-9 . _ : -",
				 what, shown, s, len > 64 ? "..." : "");
			return -1;
		}
	}
	return 0;
}

int params_check_name(const char *name, size_t len, char *why, size_t why_len)
{
	return check_id("name", name, len, NAME_MAX_LEN, why, why_len);
}

int params_check_owner(const char *owner, size_t len, char *why, size_t why_len)
{
	if (check_id("owner", owner, len, OWNER_MAX_LEN, why, why_len) < 0)
		return -1;
	/* Owners are hash fields next to the layout's own (Redisson never
	 * makes such ids): "mode" marks a read-write lock, so a lock held by
	 * "mode" would look like one and could never be released. Timeout keys
	 * <tag>:<owner>:rwlock_timeout:<k> cannot collide: two owners give
	 * two keys, since both end in their own decimal k. */
	if (len == 4 && !memcmp(owner, "mode", 4)) {
		snprintf(why, why_len, "owner 'mode' is reserved: it is the field that marks a "
			 "read-write lock");
		return -1;
	}
	if (len >= 6 && !memcmp(owner + len - 6, ":write", 6)) {
		snprintf(why, why_len, "owner '%s' may not end in ':write' (it marks writer fields)",
			 owner);
		return -1;
	}
	return 0;
}

/* ----- Parameters ----- */

static const struct {
	const char *key;
	enum param_flags flag;
} param_keys[] = {
	{ "owner", P_OWNER }, { "ttl_ms", P_TTL }, { "wait_ms", P_WAIT }, { "force", P_FORCE },
	{ "reentrant", P_REENTRANT }, { "index", P_INDEX },
	{ "prefix", P_PREFIX }, { "limit", P_LIMIT }, { "cursor", P_CURSOR }, { "value", P_VALUE },
	{ "session", P_SESSION }, { "name", P_LABEL },
};

struct params_parse {
	struct request *rq;
	unsigned allowed;
	char why[320];		/* first problem found; empty = none */
	int nquery;
};

static void list_allowed(unsigned allowed, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(param_keys) / sizeof(param_keys[0]); i++)
		if (allowed & param_keys[i].flag)
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : "",
					      param_keys[i].key);
	if (!n)
		snprintf(out, len, "no parameters");
}

/* Which parameter is key? 0 after noting the problem when it is unknown,
 * not taken here, or given twice. */
static enum param_flags param_flag(struct params_parse *ps, const char *key)
{
	char allowed[64];

	for (size_t i = 0; i < sizeof(param_keys) / sizeof(param_keys[0]); i++) {
		if (strcmp(key, param_keys[i].key))
			continue;
		if (!(ps->allowed & param_keys[i].flag))
			break;
		if (ps->rq->lock.params.given & param_keys[i].flag) {
			snprintf(ps->why, sizeof(ps->why), "parameter '%s' is given twice", key);
			return 0;
		}
		ps->rq->lock.params.given |= param_keys[i].flag;
		return param_keys[i].flag;
	}
	list_allowed(ps->allowed, allowed, sizeof(allowed));
	snprintf(ps->why, sizeof(ps->why), "unknown parameter '%.64s'; this request takes %s",
		 key, allowed);
	return 0;
}

static void set_number(struct params_parse *ps, enum param_flags f, const char *key, long long v,
		       const char *text)
{
	const struct config *cfg = ps->rq->cfg;
	struct params *p = &ps->rq->lock.params;
	int64_t min = f == P_WAIT || f == P_INDEX ? 0 : 1;
	int64_t max = f == P_TTL ? cfg->max_ttl_ms : f == P_WAIT ? cfg->max_wait_ms
			: f == P_INDEX ? INDEX_MAX
			: ps->rq->route.op == OP_LIST ? LOCKS_LIST_MAX : LOCKS_SEMAPHORE_LIMIT_MAX;

	if (v < min || v > max) {
		snprintf(ps->why, sizeof(ps->why), "%s '%s' is out of range %lld..%lld", key,
			 text, (long long)min, (long long)max);
		return;
	}
	*(f == P_TTL ? &p->ttl_ms : f == P_WAIT ? &p->wait_ms : f == P_INDEX ? &p->index
										: &p->limit) = v;
}

/* Is s[0..len) UTF-8 text without NUL (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF)? */
static bool utf8_text(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;

	for (size_t i = 0; i < len;) {
		unsigned c = s[i], n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1
				     : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
		unsigned cp = n == 0 ? c : n == 1 ? c & 0x1f : n == 2 ? c & 0x0f : c & 0x07;

		if (c == 0 || n == 9 || len - i <= n)
			return false;
		for (unsigned k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

/* A string parameter: owner, session, prefix (a name's start: may be
 * empty), label, value or cursor (opaque here: the service reads it). */
static void set_string(struct params_parse *ps, enum param_flags f, const char *s, size_t len)
{
	struct params *p = &ps->rq->lock.params;
	char *to = f == P_OWNER ? p->owner : f == P_SESSION ? p->session : NULL;

	if (f == P_OWNER && params_check_owner(s, len, ps->why, sizeof(ps->why)) < 0)
		return;
	if (f == P_PREFIX && len > 0 &&
	    check_id("prefix", s, len, NAME_MAX_LEN, ps->why, sizeof(ps->why)) < 0)
		return;
	if (f == P_CURSOR && (len == 0 || len > LOCKS_CURSOR_MAX || memchr(s, '\0', len))) {
		snprintf(ps->why, sizeof(ps->why), "cursor must be a cursor a page of the listing "
			 "gave, 1 to %d characters", LOCKS_CURSOR_MAX);
		return;
	}
	if (f == P_SESSION && !sessions_id_shaped(s, len)) {
		snprintf(ps->why, sizeof(ps->why), "session must be a session id POST /sessions "
			 "gave: %d lowercase hex digits", SESSIONS_ID_LEN);
		return;
	}
	if (f == P_LABEL && len > 0 &&
	    check_id("name", s, len, NAME_MAX_LEN, ps->why, sizeof(ps->why)) < 0)
		return;
	if (f == P_VALUE && (len > LOCKS_VALUE_MAX || !utf8_text(s, len))) {
		snprintf(ps->why, sizeof(ps->why), len > LOCKS_VALUE_MAX
			 ? "value is %zu bytes long, at most %d are kept"
			 : "value must be UTF-8 text without NUL (%zu bytes given, at most %d)",
			 len, LOCKS_VALUE_MAX);
		return;
	}
	if (!to) {	/* the others: as long as they are (given once: param_flag) */
		to = xmalloc(len + 1);
		*(f == P_VALUE ? &p->value : f == P_CURSOR ? &p->cursor
		  : f == P_PREFIX ? &p->prefix : &p->label) = to;
	}
	memcpy(to, s, len);
	to[len] = '\0';
}

static bool is_string_param(enum param_flags f)
{
	return f == P_OWNER || f == P_PREFIX || f == P_CURSOR || f == P_VALUE || f == P_SESSION ||
	       f == P_LABEL;
}

/* One query parameter; MHD has already unescaped it. */
static enum MHD_Result query_param(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	struct params_parse *ps = cls;
	enum param_flags f;

	(void)kind;
	ps->nquery++;
	if (ps->why[0])
		return MHD_NO;
	f = param_flag(ps, key);
	if (!f)
		return MHD_NO;
	if (!value)
		value = "";
	if (is_string_param(f)) {
		set_string(ps, f, value, strlen(value));
	} else if (f == P_FORCE || f == P_REENTRANT) {
		bool *flag = f == P_FORCE ? &ps->rq->lock.params.force
					  : &ps->rq->lock.params.reentrant;

		if (!strcmp(value, "true") || !strcmp(value, "1"))
			*flag = true;
		else if (!strcmp(value, "false") || !strcmp(value, "0"))
			*flag = false;
		else
			snprintf(ps->why, sizeof(ps->why), "%s '%.64s' is not true or false", key,
				 value);
	} else {
		char *end;
		long long v;

		errno = 0;
		v = strtoll(value, &end, 10);
		if (!(*value >= '0' && *value <= '9') && *value != '-')
			end = (char *)value;	/* no sign or space before the digits */
		if (end == value || *end)
			snprintf(ps->why, sizeof(ps->why), "%s '%.64s' is not an integer", key,
				 value);
		else if (errno == ERANGE)
			snprintf(ps->why, sizeof(ps->why), "%s '%.64s' is out of range", key, value);
		else
			set_number(ps, f, key, v, value);
	}
	return ps->why[0] ? MHD_NO : MHD_YES;
}

/* One member of the JSON body. */
static void body_param(struct params_parse *ps, const char *key, json_t *v)
{
	enum param_flags f = param_flag(ps, key);
	char text[32];

	if (!f)
		return;
	switch (f) {
	case P_OWNER:
	case P_PREFIX:
	case P_CURSOR:
	case P_VALUE:
	case P_SESSION:
	case P_LABEL:
		if (!json_is_string(v))
			snprintf(ps->why, sizeof(ps->why), "%s must be a string", key);
		else
			set_string(ps, f, json_string_value(v), json_string_length(v));
		break;
	case P_FORCE:
	case P_REENTRANT:
		if (!json_is_boolean(v))
			snprintf(ps->why, sizeof(ps->why), "%s must be true or false", key);
		else if (f == P_FORCE)
			ps->rq->lock.params.force = json_is_true(v);
		else
			ps->rq->lock.params.reentrant = json_is_true(v);
		break;
	default:
		if (!json_is_integer(v)) {
			snprintf(ps->why, sizeof(ps->why), "%s must be an integer%s", key,
				 f == P_INDEX || f == P_LIMIT ? "" : " number of milliseconds");
			break;
		}
		snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		set_number(ps, f, key, json_integer_value(v), text);
	}
}

/* A body of name=value pairs joined by '&' (a form, as curl -d sends
 * one): a letter or '_' first, an '=' before any character a form's names
 * never hold. */
static bool looks_form_encoded(const char *body, size_t len)
{
	bool eq = false;

	if (len == 0 || !((body[0] >= 'a' && body[0] <= 'z') || (body[0] >= 'A' && body[0] <= 'Z') ||
			  body[0] == '_'))
		return false;
	for (size_t i = 0; i < len && !eq; i++) {
		char ch = body[i];

		if (ch == '=')
			eq = true;
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			   (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.'))
			return false;
	}
	return eq;
}

static int body_params_or_reply(struct params_parse *ps)
{
	struct request *rq = ps->rq;
	json_error_t err;
	json_t *root, *v;
	const char *key;

	root = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &err);
	if (!root && looks_form_encoded(rq->body, rq->body_len)) {
		reply_error(rq, ERR_INVALID_JSON, NULL, "body is not valid JSON: it looks "
			    "form-encoded (name=value&..., what curl -d sends unless the data "
			    "is JSON); send a JSON object (-d '{\"owner\":\"worker-1\"}') or put "
			    "the parameters in the query string (?owner=worker-1)");
		return -1;
	}
	if (!root) {
		reply_error(rq, ERR_INVALID_JSON, NULL, "body is not valid JSON: %s (line %d, column %d)",
			    err.text, err.line, err.column);
		return -1;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		reply_error(rq, ERR_INVALID_JSON, NULL, "body must be a JSON object");
		return -1;
	}
	json_object_foreach(root, key, v) {
		body_param(ps, key, v);
		if (ps->why[0])
			break;
	}
	json_decref(root);
	return 0;
}

void params_free(struct params *p)
{
	free(p->prefix);
	free(p->cursor);
	free(p->value);
	free(p->label);
	p->prefix = p->cursor = p->value = p->label = NULL;
}

const char *params_prefix(const struct params *p)
{
	return p->prefix ? p->prefix : "";
}

const char *params_label(const struct params *p)
{
	return p->label ? p->label : "";
}

int params_or_reply(struct request *rq, unsigned allowed)
{
	struct params_parse ps = { .rq = rq, .allowed = allowed };
	bool has_body = rq->body_len > 0;

	params_free(&rq->lock.params);
	memset(&rq->lock.params, 0, sizeof(rq->lock.params));
	MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, query_param, &ps);
	if (has_body && (ps.nquery > 0 || ps.why[0])) {
		reply_error(rq, ERR_INVALID_ARGUMENT, NULL,
			    "parameters must come either in the JSON body or in the query string, not both");
		return -1;
	}
	if (has_body && body_params_or_reply(&ps) < 0)
		return -1;
	if (ps.why[0]) {
		reply_error(rq, ERR_INVALID_ARGUMENT, NULL, "%s", ps.why);
		return -1;
	}
	return 0;
}
