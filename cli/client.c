/* client.c -- dlock's HTTP client of dlockd (see client.h). A libcurl
 * multi handle with one easy handle, so the connection is kept between
 * requests and the caller's loop waits on the transfer and on one fd of
 * its own (a signalfd) at once. */
#include "client.h"

#include <curl/curl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct client {
	CURLM *multi;
	CURL *easy;
	struct curl_slist *headers;
	struct curl_slist *json_headers;	/* headers, then Content-Type: JSON */
	char *server;		/* without a trailing '/' */
	char *token, *ca_file, *cert_file, *key_file;	/* as created (client_clone) */
	char *body;		/* the answer's body so far */
	size_t body_len;
	bool running;		/* easy is in multi */
	bool done;		/* ... and finished */
	CURLcode result;
	char errbuf[CURL_ERROR_SIZE];
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct client *c = arg;
	size_t len = size * n;
	char *grown;

	if (c->body_len + len > 1 << 20)	/* no dlockd answer is this large */
		return 0;
	grown = realloc(c->body, c->body_len + len + 1);
	if (!grown)
		return 0;
	c->body = grown;
	memcpy(c->body + c->body_len, data, len);
	c->body_len += len;
	c->body[c->body_len] = '\0';
	return len;
}

struct client *client_create(const char *server, const char *token,
			     const struct client_tls *tls)
{
	struct client *c = calloc(1, sizeof(*c));
	size_t len = strlen(server);

	if (!c)
		return NULL;
	while (len > 0 && server[len - 1] == '/')
		len--;
	c->server = strndup(server, len);
	c->token = token ? strdup(token) : NULL;
	c->ca_file = tls && tls->ca_file ? strdup(tls->ca_file) : NULL;
	c->cert_file = tls && tls->cert_file ? strdup(tls->cert_file) : NULL;
	c->key_file = tls && tls->key_file ? strdup(tls->key_file) : NULL;
	c->multi = curl_multi_init();
	c->easy = curl_easy_init();
	if (token) {
		char *h = NULL;

		if (asprintf(&h, "Authorization: Bearer %s", token) < 0) {
			client_free(c);
			return NULL;
		}
		c->headers = curl_slist_append(NULL, h);
		free(h);
	}
	c->json_headers = curl_slist_append(c->headers ? curl_slist_append(NULL,
						c->headers->data) : NULL, "Content-Type: application/json");
	if (!c->server || !c->multi || !c->easy || (token && !c->headers) || !c->json_headers ||
	    (token && !c->token) || (tls && tls->ca_file && !c->ca_file) ||
	    (tls && tls->cert_file && !c->cert_file) || (tls && tls->key_file && !c->key_file)) {
		client_free(c);
		return NULL;
	}
	/* set once: client_start() changes only what differs per request */
	if (tls && tls->ca_file)
		curl_easy_setopt(c->easy, CURLOPT_CAINFO, tls->ca_file);
	if (tls && tls->cert_file)
		curl_easy_setopt(c->easy, CURLOPT_SSLCERT, tls->cert_file);
	if (tls && tls->key_file)
		curl_easy_setopt(c->easy, CURLOPT_SSLKEY, tls->key_file);
	return c;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	client_abort(c);
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	curl_slist_free_all(c->headers);
	curl_slist_free_all(c->json_headers);
	free(c->server);
	free(c->token);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->body);
	free(c);
}

struct client *client_clone(const struct client *c)
{
	struct client_tls tls = { c->ca_file, c->cert_file, c->key_file };

	return client_create(c->server, c->token, &tls);
}

const char *client_server(const struct client *c)
{
	return c->server;
}

void client_start(struct client *c, const char *method, const char *path, const char *body,
		  long timeout_ms)
{
	char *url = NULL;

	client_abort(c);
	free(c->body);
	c->body = NULL;
	c->body_len = 0;
	c->errbuf[0] = '\0';
	c->done = false;
	if (asprintf(&url, "%s%s", c->server, path) < 0)
		url = NULL;
	curl_easy_setopt(c->easy, CURLOPT_URL, url ? url : "");
	free(url);		/* libcurl keeps its own copy */
	/* without a body, neither body nor Content-Type: parameters are in
	 * the query (HTTPGET forgets the last request's body) */
	if (body)
		curl_easy_setopt(c->easy, CURLOPT_COPYPOSTFIELDS, body);
	else
		curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c->easy, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ? 1L : 0L);
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, body ? c->json_headers : c->headers);
	curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
	curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS,
			 timeout_ms > 0 && timeout_ms < 5000 ? timeout_ms : 5000L);
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->easy, CURLOPT_USERAGENT, "dlock");
	curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_multi_add_handle(c->multi, c->easy);
	c->running = true;
}

bool client_poll(struct client *c, int fd, int wait_ms)
{
	struct curl_waitfd extra = { .fd = fd, .events = CURL_WAIT_POLLIN };
	int still, left;
	CURLMsg *m;

	if (!c->running)
		return false;
	curl_multi_perform(c->multi, &still);
	if (still && !c->done)
		curl_multi_poll(c->multi, fd >= 0 ? &extra : NULL, fd >= 0 ? 1 : 0,
				wait_ms < 0 ? 0 : wait_ms, NULL);
	curl_multi_perform(c->multi, &still);
	while ((m = curl_multi_info_read(c->multi, &left))) {
		if (m->msg == CURLMSG_DONE && m->easy_handle == c->easy) {
			c->done = true;
			c->result = m->data.result;
		}
	}
	return c->done;
}

void client_finish(struct client *c, struct answer *a)
{
	curl_off_t retry = -1;

	memset(a, 0, sizeof(*a));
	a->retry_after_s = -1;
	if (!c->running)
		return;
	if (c->result == CURLE_OK) {
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &a->status);
		if (curl_easy_getinfo(c->easy, CURLINFO_RETRY_AFTER, &retry) == CURLE_OK &&
		    retry > 0)
			a->retry_after_s = retry > 3600 ? 3600 : (int)retry;
		if (c->body)
			a->json = json_loadb(c->body, c->body_len, 0, NULL);
	} else {
		snprintf(a->error, sizeof(a->error), "%s",
			 c->errbuf[0] ? c->errbuf : curl_easy_strerror(c->result));
	}
	curl_multi_remove_handle(c->multi, c->easy);
	c->running = false;
}

void client_abort(struct client *c)
{
	if (!c->running)
		return;
	/* removing an unfinished transfer closes its connection */
	curl_multi_remove_handle(c->multi, c->easy);
	c->running = false;
}

static bool fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

bool client_call(struct client *c, const char *method, const char *path, const char *body,
		 long timeout_ms, int fd, struct answer *a)
{
	client_start(c, method, path, body, timeout_ms);
	for (;;) {
		if (client_poll(c, fd, 1000)) {
			client_finish(c, a);
			return true;
		}
		if (fd >= 0 && fd_readable(fd)) {
			client_abort(c);
			memset(a, 0, sizeof(*a));
			a->retry_after_s = -1;
			snprintf(a->error, sizeof(a->error), "interrupted");
			return false;
		}
	}
}

const char *answer_code(const struct answer *a)
{
	const char *s = json_string_value(json_object_get(a->json, "error"));

	return s ? s : "";
}

const char *answer_message(const struct answer *a)
{
	const char *s = json_string_value(json_object_get(a->json, "message"));

	return s ? s : "";
}

void answer_release(struct answer *a)
{
	json_decref(a->json);
	a->json = NULL;
}
