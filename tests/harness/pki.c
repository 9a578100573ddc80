/* pki.c -- the run's test certificates, made once with openssl in the
 * run's directory (pki_ready), for the HTTPS tests (test_tls.c) and the
 * TLS-to-Redis tests (test_redis_tls.c): a CA, another CA that signed
 * nothing used, servers 1..5 (127.0.0.1 and localhost), a client and a
 * node (server and client: a Redis that replicates over TLS) signed by
 * the CA, a self-signed client, and a server signed by the CA whose only
 * name is elsewhere.invalid. */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char pki[300];	/* the directory of the run's certificates */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* pki/name.pem and pki/name.key: an EC P-256 certificate with subject
 * CN=cn, signed by pki/ca_name (NULL: self-signed), with the extensions
 * ext (openssl -extfile lines; NULL with a self-signed one). */
static int make_cert(const char *name, const char *cn, const char *ca_name, const char *ext)
{
	FILE *f;
	char path[400];

	if (!ca_name)
		return sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
			  "-keyout %s/%s.key -out %s/%s.pem -days 2 -subj '/CN=%s' 2>/dev/null",
			  pki, name, pki, name, cn);
	snprintf(path, sizeof(path), "%s/%s.ext", pki, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(ext, f);
	fclose(f);
	return sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "
		  "%s/%s.key -out %s/%s.csr -subj '/CN=%s' 2>/dev/null && openssl x509 -req -in "
		  "%s/%s.csr -CA %s/%s.pem -CAkey %s/%s.key -CAcreateserial -out %s/%s.pem -days 2 "
		  "-extfile %s 2>/dev/null", pki, name, pki, name, cn, pki, name, pki, ca_name, pki,
		  ca_name, pki, name, path);
}

#define SERVER_EXT "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"

bool pki_ready(void)
{
	static int made;	/* 0 not yet, 1 made, -1 failed */
	char cn[64], name[32];

	if (made)
		return made > 0;
	made = -1;
	snprintf(pki, sizeof(pki), "%s/pki", test_tmpdir());
	mkdir(pki, 0700);
	if (make_cert("ca", "dlockd test CA", NULL, NULL) != 0 ||
	    make_cert("other-ca", "another CA", NULL, NULL) != 0 ||
	    make_cert("client", "good client", "ca", "extendedKeyUsage=clientAuth\n") != 0 ||
	    make_cert("node", "redis node", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
		      "extendedKeyUsage=serverAuth,clientAuth\n") != 0 ||
	    make_cert("elsewhere", "elsewhere", "ca", "subjectAltName=DNS:elsewhere.invalid\n"
		      "extendedKeyUsage=serverAuth\n") != 0 ||
	    make_cert("self", "self-signed client", NULL, NULL) != 0)
		return false;
	for (int i = 1; i <= 5; i++) {
		snprintf(name, sizeof(name), "server%d", i);
		snprintf(cn, sizeof(cn), "dlockd server %d", i);
		if (make_cert(name, cn, "ca", SERVER_EXT) != 0)
			return false;
	}
	made = 1;
	return true;
}

const char *pki_dir(void)
{
	return pki;
}

const char *pki_path(const char *file)
{
	static char paths[32][400];
	static unsigned n;

	for (unsigned i = 0; i < n; i++)
		if (!strcmp(strrchr(paths[i], '/') + 1, file))
			return paths[i];
	if (n == 32)
		return "/nonexistent";
	snprintf(paths[n], sizeof(paths[n]), "%s/%s", pki, file);
	return paths[n++];
}

int dlockd_start_mtls(struct dlockd_srv *d, const char *server)
{
	char pem[64], key[64];
	const char *flags[] = { "--tls-cert", NULL, "--tls-key", NULL, "--tls-client-ca", NULL,
				NULL };
	struct http_tls t = { .ca = NULL };

	if (!pki_ready())
		return -1;
	snprintf(pem, sizeof(pem), "%s.pem", server);
	snprintf(key, sizeof(key), "%s.key", server);
	flags[1] = pki_path(pem);
	flags[3] = pki_path(key);
	flags[5] = pki_path("ca.pem");
	t.ca = pki_path("ca.pem");
	t.cert = pki_path("client.pem");
	t.key = pki_path("client.key");
	http_tls(&t);
	return dlockd_start(d, NULL, flags);
}
