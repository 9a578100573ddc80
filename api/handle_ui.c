/* handle_ui.c -- the status page (/ui): serves the files of api/ui/,
 * embedded at build time (api/ui_assets.h), each with its Content-Type, an
 * ETag the browser revalidates with (304 when it matches) and the page's
 * Content-Security-Policy (reply_static). The page needs no token: what it
 * shows comes from the lock API, with the token the user gives it. */
#include "api/handlers.h"

#include "api/reply.h"
#include "api/ui_assets.h"

#include <string.h>

/* Does If-None-Match (a list of entity tags, or "*") name etag? Weak tags
 * match too (RFC 9110 §13.1.2: weak comparison). */
static int etag_matches(const char *inm, const char *etag)
{
	size_t n = strlen(etag);

	if (!inm)
		return 0;
	for (const char *p = inm; *p;) {
		p += strspn(p, " \t,");
		if (*p == '*')
			return 1;
		if (!strncmp(p, "W/", 2))
			p += 2;
		if (!strncmp(p, etag, n) && (p[n] == '\0' || strchr(" \t,", p[n])))
			return 1;
		p += strcspn(p, ",");
	}
	return 0;
}

enum MHD_Result handle_ui(struct request *rq)
{
	for (size_t i = 0; i < ui_assets_count; i++) {
		const struct ui_asset *a = &ui_assets[i];
		const char *inm;

		if (strcmp(rq->url, a->path))
			continue;
		inm = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
						  MHD_HTTP_HEADER_IF_NONE_MATCH);
		return reply_static(rq, a->content_type, a->data, a->len, a->etag,
				    etag_matches(inm, a->etag));
	}
	/* a route without its file: the route table and api/ui/ disagree */
	return reply_error(rq, ERR_NOT_FOUND, NULL, "no such resource: %.200s", rq->url);
}
