/* framing.c -- can a request be read only one way? The checks of its
 * request line and header fields that keep a request from being smuggled
 * past a proxy in front (RFC 9110, RFC 9112): what libmicrohttpd 0.9.75
 * lets through although another parser could read it otherwise -- a NUL,
 * a control byte or a space in the target, a method that is not a token,
 * a folded or doubled field, ambiguous body framing. api/server.c calls
 * them as a request's headers come in and refuses what they name with 400
 * and "Connection: close". They read MHD's buffers where MHD left them
 * (addresses compared, nothing past a NUL read), so they are tied to how
 * MHD 0.9.75 lays a request out. */
#include "api/framing.h"

#include "api/request.h"
#include "service/base/util.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A character of a token (RFC 9110 §5.6.2): methods and field names. */
static bool tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Is there a NUL inside the request target? MHD 0.9.75 finds the version
 * by searching back from the end of the request line and cuts the line in
 * place, "<target>\0HTTP/1.1", so every C string of the target (the path
 * request_begin keeps, the query MHD parses) ends at a NUL the client
 * sent: the name, owner or a parameter would be cut short silently. The
 * version MHD hands the handler lies right after the target's end unless
 * a NUL came first; only addresses are compared, nothing past the NUL is
 * read. */
static bool target_has_nul(const struct request *rq, const char *version)
{
	return rq->target && version && version != rq->target + rq->target_len + 1;
}

/* RFC 9112 §3.2 and RFC 3986: a request target holds no control byte (NUL
 * included) and no space. Returns why rq's does, or NULL. A path cut by a
 * NUL gets "%00..." after it, so that neither the log nor the name shows
 * it as if it were the whole request. */
static const char *target_check(struct request *rq, const char *version)
{
	if (target_has_nul(rq, version)) {
		size_t len = strlen(rq->url);

		if (len == rq->target_len) {	/* it cut the path, not the query */
			rq->url = xrealloc(rq->url, len + sizeof("%00..."));
			memcpy(rq->url + len, "%00...", sizeof("%00..."));
		}
		return "the request target holds a NUL byte";
	}
	if (rq->target_ctl)
		return "the request target holds a control character or a space (escape it: %XX)";
	return NULL;
}

/* The request line: the target as request_begin (api/server.c) saw it,
 * the method and version MHD hands the handler. */
const char *framing_check_line(struct request *rq, const char *method, const char *version)
{
	const char *bad = target_check(rq, version);

	/* the method is a token (RFC 9110 §9.1) ending right before the
	 * target: a NUL in it would leave MHD a shorter method than sent */
	if (!bad && rq->target && method && method + strlen(method) + 1 != rq->target)
		bad = "the request method holds a NUL byte";
	for (const char *m = method; !bad && m && *m; m++)
		if (!tchar((unsigned char)*m))
			bad = "the request method holds a character a method may not";
	return bad;
}

/* What the framing check found in the headers. */
struct framing {
	unsigned content_length, transfer_encoding, authorization, host;
	const char *te;			/* the (last) Transfer-Encoding value */
	bool folded;			/* a line folded onto the next (obs-fold) */
	bool ctl_value;			/* a value holding a bare CR or another control */
	bool empty_name;		/* a field with no name (": x") */
	bool odd_end;			/* a line ended otherwise than the request line */
	const char *line_end;		/* where the last line's text ends: the request
					 * line's version, then each field's value */
	size_t eol;			/* the request line's end: 1 (LF), 2 (CR LF); 0 unknown */
	char bad_name[72];		/* a field name that is not a token */
};

/* Did this field come on one line? MHD 0.9.75 leaves a field where it lay
 * in its read buffer, the colon overwritten: "<name>\0<blanks><value>".
 * A line folded onto the next (RFC 9112 §5.2) it takes by gluing the
 * continuation, blanks stripped, to the NAME, which it copies further on
 * in the connection's memory (the value stays put, before it): so
 * "Content-Length: 0" + " 53" reaches dlockd as a field "Content-Length53"
 * with the value "0", and no Content-Length at all. Bytes are read only
 * between name and value, where that line lies. */
static bool one_line(const char *key, size_t key_len, const char *value)
{
	const char *p = key + key_len;

	if (!value || value <= p || *p != '\0')
		return false;
	while (++p < value)
		if (*p != ' ' && *p != '\t')
			return false;
	return true;
}

/* How many bytes [from, to) has if all are zeros (line ends as MHD 0.9.75
 * leaves them: a CR LF or an LF, zeroed), else -1. */
static long zeros(const char *from, const char *to)
{
	if (!from || to < from || to - from > 8)
		return -1;
	for (const char *p = from; p < to; p++)
		if (*p)
			return -1;
	return (long)(to - from);
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
				      size_t key_len, const char *value, size_t value_len)
{
	struct framing *f = cls;

	(void)kind;
	/* between the last line's text and this name only its line end, as
	 * the request line's: a value that held a NUL ends there for MHD, the
	 * rest of its line ("Bearer t\0junk") dropped unseen */
	if (f->line_end) {
		long n = zeros(f->line_end, key);

		if (!f->eol && (n == 1 || n == 2))
			f->eol = (size_t)n;
		else if (n < 0 || (size_t)n != f->eol)
			f->odd_end = true;
	}
	f->line_end = value ? value + value_len : NULL;
	if (!key_len) {
		f->empty_name = true;
		return MHD_YES;
	}
	if (!one_line(key, key_len, value)) {
		f->folded = true;
		return MHD_YES;
	}
	/* RFC 9110 §5.5: no CR, LF, NUL or other control but HTAB in a value;
	 * a bare CR that MHD leaves in the value another parser may take
	 * for a line end, and read a field this one does not see */
	for (size_t i = 0; i < value_len; i++) {
		unsigned char c = (unsigned char)value[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			f->ctl_value = true;
	}
	for (size_t i = 0; i < key_len; i++) {
		if (!tchar((unsigned char)key[i])) {
			if (!f->bad_name[0])
				snprintf(f->bad_name, sizeof(f->bad_name), "%.*s",
					 (int)(key_len > 64 ? 64 : key_len), key);
			return MHD_YES;
		}
	}
	if (key_len == 14 && !strncasecmp(key, "Content-Length", 14))
		f->content_length++;
	if (key_len == 17 && !strncasecmp(key, "Transfer-Encoding", 17)) {
		f->transfer_encoding++;
		f->te = value;
	}
	if (key_len == 13 && !strncasecmp(key, "Authorization", 13))
		f->authorization++;
	if (key_len == 4 && !strncasecmp(key, "Host", 4))
		f->host++;
	return MHD_YES;
}

/* Where the header block ends: MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE
 * counted from the method; NULL if unknown. */
static const char *block_end(const struct request *rq, const char *method)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);

	return ci && method ? method + ci->header_size : NULL;
}

/* Does the header block end with its last line's end and an empty line,
 * each ended as the request line is? MHD 0.9.75 takes a line with an
 * empty field name (":", ": x") after another field for the block's end:
 * zeroing its colon leaves the line looking empty. The fields after it
 * are dropped (Content-Length too), and what follows is read as the body
 * or as the next request, which a proxy in front took for fields (a
 * request smuggled; found by two probes). Every such line leaves more
 * than two line ends' worth, or bytes that are not zeros -- but one: a
 * bare ":" (or a NUL) ended by a bare LF in a request of CR LF lines
 * leaves two zeros, as a CR LF does. Only bytes inside the block are
 * read. */
static bool ends_after_last_line(const struct framing *f, const char *end)
{
	long n;

	if (!end || !f->line_end)
		return true;	/* an HTTP/0.9 line: no version in the block */
	n = zeros(f->line_end, end);
	if (f->eol)
		return n == (long)(2 * f->eol);
	return n == 2 || n == 4;	/* no field: the request line, an empty line */
}

/* RFC 9112 §6.1, §6.3, §5.1 and §5.2: a message whose body length two
 * parties could read differently (how a request is smuggled past a proxy)
 * is refused with 400 and its connection closed, whatever MHD would make
 * of it; so is one with a field two parties could take differently: a
 * second Authorization (MHD would take the first, a proxy maybe the last)
 * or Host, or an HTTP/1.1 request with no Host at all (§3.2: a server
 * MUST answer it 400). A Content-Length that is not all digits MHD refuses
 * itself, before dlockd sees the request. Returns why rq is refused, or
 * NULL. */
const char *framing_check_headers(struct request *rq, const char *method, const char *version)
{
	struct framing f = { 0 };
	const char *why = NULL, *end = block_end(rq, method);

	/* the version lies in the block, at the end of the request line's text
	 * (not so for an HTTP/0.9 line, which has none) */
	if (end && version && version > method && version < end)
		f.line_end = version + strlen(version);
	MHD_get_connection_values_n(rq->conn, MHD_HEADER_KIND, framing_header, &f);
	if (f.folded)
		why = "a header field is folded onto the next line (obs-fold); send each on one line";
	else if (f.empty_name || !ends_after_last_line(&f, end))
		why = "a header line has no field name (a line starting with ':'), or the header "
		      "lines do not all end alike (CR LF, or a bare LF)";
	else if (f.odd_end)
		why = "a header line ends otherwise than the request line (a bare LF among CR LFs?), "
		      "or a field value holds a NUL";
	else if (f.bad_name[0])
		why = "a header field name holds a character a name may not (whitespace before the colon?)";
	else if (f.ctl_value)
		why = "a header field value holds a control character (a bare CR?)";
	else if (f.content_length > 1)
		why = "Content-Length is given more than once";
	else if (f.transfer_encoding && f.content_length)
		why = "Transfer-Encoding and Content-Length may not come together";
	else if (f.transfer_encoding > 1 || (f.transfer_encoding && strcasecmp(f.te, "chunked")))
		why = "the only transfer coding taken is 'Transfer-Encoding: chunked'";
	else if (f.transfer_encoding && version && !strcmp(version, MHD_HTTP_VERSION_1_0))
		why = "an HTTP/1.0 request may not use Transfer-Encoding";
	else if (f.authorization > 1)
		why = "Authorization is given more than once";
	else if (f.host > 1)
		why = "Host is given more than once";
	else if (!f.host && version && !strcmp(version, MHD_HTTP_VERSION_1_1))
		why = "an HTTP/1.1 request must carry a Host header field";
	return why;
}
