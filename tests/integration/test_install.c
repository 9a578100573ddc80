/* test_install.c -- `make install PREFIX=... DESTDIR=...`, the step the
 * Docker image is built with: the staged tree holds the binaries (dlockd
 * and dlock), the contract, the systemd unit (its ExecStart the installed
 * binary under PREFIX), the examples of its env file and auth drop-in,
 * dlock's bash completion and the man pages dlockd.8 and dlock.1,
 * and the installed binary serves locks and that contract. */
#include "../harness/harness.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	*len = fread(buf, 1, (size_t)n, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

TEST(make_install_stages_a_working_dlockd)
{
	const char *bin = dlockd_binary();
	char build[256], stage[300], cmd[2048], installed[400], doc[400];
	struct dlockd_srv d;
	struct http_resp r;
	struct stat sb;
	const char *old;
	char *text;
	size_t len;
	int rc;

	snprintf(build, sizeof(build), "%s", bin);
	snprintf(stage, sizeof(stage), "%s/stage", test_tmpdir());
	/* BUILD= the tree the binary under test came from: nothing is rebuilt */
	snprintf(cmd, sizeof(cmd), "env -u MAKEFLAGS -u MAKELEVEL make -s install BUILD=%s "
		 "PREFIX=/opt/dlockd DESTDIR=%s >%s/install.log 2>&1", dirname(build), stage,
		 test_tmpdir());
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "make install succeeds (see %s/install.log)",
	      test_tmpdir());
	snprintf(installed, sizeof(installed), "%s/opt/dlockd/bin/dlockd", stage);
	snprintf(doc, sizeof(doc), "%s/opt/dlockd/share/dlockd/openapi.yaml", stage);
	CHECK(stat(installed, &sb) == 0 && (sb.st_mode & 0111), "the binary is installed executable");
	CHECK(stat(doc, &sb) == 0, "the contract is installed");
	snprintf(cmd, sizeof(cmd), "grep -qx 'ExecStart=/opt/dlockd/bin/dlockd' "
		 "%s/opt/dlockd/lib/systemd/system/dlockd.service", stage);
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
	      "the systemd unit is installed, ExecStart under PREFIX");
	snprintf(cmd, sizeof(cmd), "test -f %s/opt/dlockd/share/dlockd/dlockd.env.example && "
		 "grep -q '^LoadCredential=tokens:' %s/opt/dlockd/share/dlockd/auth.conf.example && "
		 "grep -q '^LoadCredential=tls-key:' %s/opt/dlockd/share/dlockd/tls.conf.example",
		 stage, stage, stage);
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
	      "the env file and the auth and TLS drop-in examples too");
	snprintf(cmd, sizeof(cmd), "%s/opt/dlockd/bin/dlock --help | grep -q 'dlock run'", stage);
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "dlock is installed beside it and runs");
	snprintf(cmd, sizeof(cmd), "bash -n %s/opt/dlockd/share/bash-completion/completions/dlock "
		 "&& grep -q 'complete -F _dlock dlock' "
		 "%s/opt/dlockd/share/bash-completion/completions/dlock", stage, stage);
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "and dlock's bash completion");
	/* the man pages, where man finds them under PREFIX, and they render
	 * as man shows them, without a groff warning */
	snprintf(cmd, sizeof(cmd), "for m in man8/dlockd.8 man1/dlock.1; do "
		 "f=%s/opt/dlockd/share/man/$m; test -f $f || exit 1; "
		 "w=$(groff -man -Tutf8 -ww -z $f 2>&1); test -z \"$w\" || "
		 "{ echo \"$w\"; exit 1; }; done; "
		 "MANWIDTH=80 man -l %s/opt/dlockd/share/man/man8/dlockd.8 2>/dev/null | "
		 "grep -q 'DLOCKD_REDIS_URL' && "
		 "MANWIDTH=80 man -l %s/opt/dlockd/share/man/man1/dlock.1 2>/dev/null | "
		 "grep -q 'conflict-exit-code'", stage, stage, stage);
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
	      "and the man pages dlockd.8 and dlock.1 under share/man, rendering cleanly");

	old = dlockd_use_bin(installed);
	rc = dlockd_start(&d, NULL, NULL);
	dlockd_use_bin(old);
	CHECK(rc == 0, "the installed binary starts");
	http_on(d.base, "PUT", "/locks/installed-check?owner=me", NULL, &r);
	CHECK_STATUS(r, 200, "and hands out a lock");
	http_free(&r);
	http_on(d.base, "DELETE", "/locks/installed-check?owner=me", NULL, &r);
	CHECK_STATUS(r, 200, "and releases it");
	http_free(&r);
	http_on(d.base, "GET", "/openapi.yaml", NULL, &r);
	text = slurp(doc, &len);
	CHECK(r.status == 200 && text && strlen(r.body) == len && !memcmp(r.body, text, len),
	      "GET /openapi.yaml serves exactly the installed contract");
	CHECK(strstr(r.content_type, "yaml"), "as YAML: %s", r.content_type);
	free(text);
	http_free(&r);
	CHECK(dlockd_stop(&d, 5000) == 0, "clean exit");
}

/* Off Debian (no apt-get, no dpkg) `make` installs nothing: it finds the
 * libraries with pkg-config and builds, or stops naming the packages to
 * install on Debian, Fedora and Homebrew. Run on a PATH of a few tools
 * and a pkg-config that knows every library but `missing` ("" : none). */
static int deps_build_off_debian(const char *missing, char *out, size_t cap)
{
	static const char *const tools[] = { "sh", "make", "cc", "sed", "head", "cat", "find",
					     "id", "mkdir", "env" };
	char dir[300], cmd[2048], log[400];
	FILE *f;
	int rc;

	snprintf(dir, sizeof(dir), "%s/offdebian-%s", test_tmpdir(), *missing ? missing : "all");
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
	if (system(cmd) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		snprintf(cmd, sizeof(cmd), "p=$(command -v %s) && ln -sf \"$p\" %s/%s", tools[i], dir,
			 tools[i]);
		if (system(cmd) != 0)
			return -1;
	}
	snprintf(cmd, sizeof(cmd), "%s/pkg-config", dir);
	f = fopen(cmd, "w");
	if (!f)
		return -1;
	fprintf(f, "#!/bin/sh\nfor a; do [ \"$a\" = '%s' ] && exit 1; done\nexit 0\n",
		*missing ? missing : "-none-");
	fclose(f);
	chmod(cmd, 0755);
	snprintf(log, sizeof(log), "%s.log", dir);
	snprintf(cmd, sizeof(cmd), "env -u MAKEFLAGS -u MAKELEVEL PATH=%s make -s deps-build "
		 ">%s 2>&1", dir, log);
	rc = system(cmd);
	file_read(log, out, cap);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(make_off_debian_uses_pkg_config_and_names_packages)
{
	char out[4096];
	int rc;

	rc = deps_build_off_debian("", out, sizeof(out));
	CHECK(rc == 0 && !strstr(out, "apt-get"), "every library found: nothing to install (%d: %s)",
	      rc, out);
	rc = deps_build_off_debian("hiredis", out, sizeof(out));
	CHECK(rc != 0, "hiredis missing: make stops (%d: %s)", rc, out);
	CHECK(strstr(out, "hiredis") && strstr(out, "apt-get install") &&
	      strstr(out, "dnf install") && strstr(out, "brew install") &&
	      strstr(out, "libhiredis-dev") && strstr(out, "hiredis-devel"),
	      "and names the packages for Debian, Fedora and Homebrew: %s", out);
}

/* make dist: a tarball of the source under dlockd-VERSION/ that builds
 * with make as it is (checked cheaply: make -n plans the build of both
 * binaries, and its version is VERSION's, without a commit). */
TEST(make_dist_makes_a_tarball_that_builds)
{
	char cmd[2048], out[4096], plan[400], version[64] = "";
	FILE *f;
	int rc;

	f = fopen("VERSION", "r");
	CHECK(f && fgets(version, sizeof(version), f), "read VERSION");
	fclose(f);
	version[strcspn(version, "\n")] = '\0';
	snprintf(cmd, sizeof(cmd), "cd %s && rm -rf dist && mkdir dist && cd - >/dev/null && "
		 "env -u MAKEFLAGS -u MAKELEVEL make -s dist BUILD=%s/dist >/dev/null && "
		 "tar -xzf %s/dist/dlockd-%s.tar.gz -C %s/dist && "
		 "cd %s/dist/dlockd-%s && env -u MAKEFLAGS -u MAKELEVEL -u BUILD -u SAN -u CFLAGS "
		 "make -n all >../plan 2>&1",
		 test_tmpdir(), test_tmpdir(), test_tmpdir(), version, test_tmpdir(), test_tmpdir(),
		 version);
	rc = system(cmd);
	snprintf(plan, sizeof(plan), "%s/dist/plan", test_tmpdir());
	file_read(plan, out, sizeof(out));
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "the tarball's make -n all succeeds: %s", out);
	snprintf(cmd, sizeof(cmd), "-DDLOCKD_VERSION='\"%s\"'", version);
	CHECK(file_contains(plan, "-o build/dlockd ") && file_contains(plan, "-o build/dlock ") &&
	      file_contains(plan, cmd), "and plans dlockd and dlock, version %s (see %s)", version,
	      plan);
}
