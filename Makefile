# dlockd -- build, run and test. Each target installs the Debian packages
# it needs first (apt-get; root or sudo), and only those: `make` the build
# packages, `make run` also redis-server, `make test` also the test tools.
# Without apt-get nothing is installed: the libraries are found with
# pkg-config, and a missing one stops make with the packages to install.

BUILD ?= build
CC ?= cc
PKGS = libmicrohttpd jansson hiredis gnutls
# CFLAGS/LDFLAGS are the caller's (make CFLAGS=-O0); what the build needs
# is added in ALL_CFLAGS/ALL_LDFLAGS, so a command-line CFLAGS cannot drop it.
CFLAGS ?= -O2 -g
ALL_CFLAGS = $(CFLAGS) -std=c11 -D_GNU_SOURCE -pthread -I. -I$(BUILD)
ALL_LDFLAGS = $(LDFLAGS) -pthread
WARN = -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes \
       -Wwrite-strings -Wvla -fno-common
ifeq ($(SAN),1)
ALL_CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
ALL_LDFLAGS += -fsanitize=address,undefined
endif
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
TEST_LIBS = $(shell pkg-config --libs libcurl cmocka 2>/dev/null)

SERVICE_SRC = $(wildcard service/*/*.c)
API_SRC = $(wildcard api/*.c)
LIB_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(SERVICE_SRC) $(API_SRC)) $(BUILD)/lua_scripts.o \
	$(BUILD)/openapi_doc.o $(BUILD)/ui_assets.o
LUA = $(sort $(wildcard lua/*.lua))

UNIT_SRC = $(wildcard tests/unit/test_*.c)
UNIT_BINS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
ITEST_SRC = $(wildcard tests/integration/*.c) $(wildcard tests/harness/*.c)
ITEST_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(ITEST_SRC))
ITEST_BIN = $(BUILD)/tests/dlockd_integration

PREFIX ?= /usr/local
DESTDIR ?=

BUILD_PACKAGES = build-essential pkg-config libmicrohttpd-dev libjansson-dev libhiredis-dev libgnutls28-dev \
	libcurl4-openssl-dev
FUZZ_PACKAGES = clang libclang-rt-14-dev
RUN_PACKAGES = redis-server redis-tools
TEST_PACKAGES = libcurl4-openssl-dev libcmocka-dev redis-server redis-tools nodejs npm \
	curl python3 openssl chromium groff-base prometheus golang-go
LINT_PACKAGES = yamllint nodejs npm binutils systemd groff-base prometheus

# The version: the semantic version in VERSION (the one source: a test
# holds openapi.yaml's info.version, the Dockerfile's ARG VERSION and
# CHANGELOG.md to it), then in a git checkout the commit, as
# "0.4.0 (e2b678d)". Only service/base/version.o is compiled with it, and
# only when it changed (the FORCE'd stamp below keeps its mtime otherwise).
DLOCKD_RELEASE := $(shell cat VERSION 2>/dev/null)
DLOCKD_REVISION := $(shell [ -e .git ] && git describe --always --dirty --exclude='*' 2>/dev/null)
DLOCKD_VERSION := $(DLOCKD_RELEASE)$(if $(DLOCKD_REVISION), ($(DLOCKD_REVISION)))

.PHONY: man docs
.PHONY: all deps deps-build deps-run deps-lint deps-fuzz deps-peers bench-peers run test test-asan test-valgrind \
	check-layers unit integration install install-strip dist lint contract-tools deploy-tools bench fuzz chaos clean FORCE \
	ui-tools test-ui ui-screenshot
all: $(BUILD)/dlockd $(BUILD)/dlock

# What `make` and `make run` need is looked for first -- the libraries
# with pkg-config, redis-server and redis-cli -- and nothing is installed
# when all is there. Otherwise, with apt-get, the Debian packages are
# installed; without (off Debian), make stops naming the packages of
# Debian/Ubuntu, Fedora and Homebrew. The test and lint tools are named,
# not checked, off Debian.
PC_BUILD = libmicrohttpd jansson hiredis gnutls libcurl
FEDORA_BUILD_PACKAGES = gcc make pkgconf-pkg-config libmicrohttpd-devel jansson-devel \
	hiredis-devel gnutls-devel libcurl-devel
BREW_BUILD_PACKAGES = pkg-config libmicrohttpd jansson hiredis gnutls curl
deps-build: FEDORA_PACKAGES = $(FEDORA_BUILD_PACKAGES)
deps-build: BREW_PACKAGES = $(BREW_BUILD_PACKAGES)
deps-run: FEDORA_PACKAGES = redis
deps-run: BREW_PACKAGES = redis
deps-build: OFF_DEBIAN_MISSING = $$(command -v cc >/dev/null || echo cc; \
	command -v pkg-config >/dev/null || echo pkg-config; \
	for p in $(PC_BUILD); do pkg-config --exists $$p 2>/dev/null || echo $$p; done)
deps-run: OFF_DEBIAN_MISSING = $$(for c in redis-server redis-cli; do \
	command -v $$c >/dev/null || echo $$c; done)
OFF_DEBIAN_MISSING = 
HAS_APT = command -v apt-get >/dev/null && command -v dpkg >/dev/null

# Install what is missing; a no-op (one dpkg query) when all is there. Node
# and npm count as present when the commands are (NodeSource's nodejs ships
# npm and conflicts with Debian's npm package), build-essential when cc and
# make are (the Dockerfile's build stage installs gcc, not build-essential). Every compile waits for
# deps-build (an order-only prerequisite), so `make -j` never compiles
# before the headers are there; the other lists wait for deps-build too, so
# that two apt-get never run at once.
deps: DEB_PACKAGES = $(TEST_PACKAGES)
deps-build: DEB_PACKAGES = $(BUILD_PACKAGES)
deps-run: DEB_PACKAGES = $(RUN_PACKAGES)
deps-lint: DEB_PACKAGES = $(LINT_PACKAGES)
deps-fuzz: DEB_PACKAGES = $(FUZZ_PACKAGES)
deps-peers: DEB_PACKAGES = $(PEERS_PACKAGES)
deps deps-run deps-lint deps-fuzz deps-peers: deps-build
deps deps-build deps-run deps-lint deps-fuzz deps-peers:
	@if [ -n "$(FEDORA_PACKAGES)" ] && [ -z "$(OFF_DEBIAN_MISSING)" ]; then exit 0; fi; \
	if ! { $(HAS_APT); }; then \
		missing="$(OFF_DEBIAN_MISSING)"; \
		if [ -z "$(FEDORA_PACKAGES)" ]; then \
			echo "make $@: no apt-get: not installing (Debian names) $(DEB_PACKAGES)" >&2; \
			exit 0; fi; \
		[ -z "$$missing" ] && exit 0; \
		echo "make $@: missing:" $$missing "-- install, then make again:" >&2; \
		echo "  Debian/Ubuntu: sudo apt-get install $(DEB_PACKAGES)" >&2; \
		echo "  Fedora:        sudo dnf install $(FEDORA_PACKAGES)" >&2; \
		echo "  Homebrew:      brew install $(BREW_PACKAGES)" >&2; \
		exit 1; \
	fi; \
	missing=$$(for p in $(DEB_PACKAGES); do \
		case $$p in nodejs|npm) command -v $${p%js} >/dev/null && continue;; \
		build-essential) command -v cc >/dev/null && command -v make >/dev/null && continue;; \
		esac; \
		dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$SUDO apt-get install -y -q $$missing >/dev/null || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q $$missing >/dev/null; } || \
		{ echo "could not install: $$missing" >&2; exit 1; }; \
	fi

$(BUILD)/dlockd: $(BUILD)/main.o $(LIB_OBJS)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# dlock, the command-line client (cli/): libcurl and jansson, no more.
CLI_SRC = $(wildcard cli/*.c)
CLI_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRC))
CLI_LIBS = $(shell pkg-config --libs libcurl jansson 2>/dev/null)
$(CLI_OBJS): ALL_CFLAGS += $(shell pkg-config --cflags libcurl 2>/dev/null)
$(BUILD)/dlock: $(CLI_OBJS) $(BUILD)/service/base/version.o
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(CLI_LIBS)

$(BUILD)/%.o: %.c | deps-build $(BUILD)/lua_scripts.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) $(WARN) -MMD -MP -c -o $@ $<

# The Lua scripts: lua/gen-scripts.sh makes their table (enum script_id in
# lua_scripts.h, each script's libraries and source in lua_scripts.c) from
# the files of lua/ and the libs: line each opens with; see its head. The
# header changes only when a script comes or goes (lua_names.txt, FORCE'd,
# keeps its mtime otherwise), so editing a script recompiles only
# lua_scripts.c. Every compile waits for the header (order-only: the .d
# files name who includes it).
LUA_LIB = $(wildcard lua/lib/*.lua)
LUA_GEN = lua/gen-scripts.sh
$(BUILD)/lua_names.txt: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = '$(LUA)' ] || echo '$(LUA)' >$@
$(BUILD)/lua_scripts.h: $(LUA_GEN) $(BUILD)/lua_names.txt
	@sh $(LUA_GEN) h $(LUA) >$@.tmp && mv $@.tmp $@
$(BUILD)/lua_scripts.c: $(LUA_GEN) $(BUILD)/lua_names.txt $(LUA) $(LUA_LIB)
	@sh $(LUA_GEN) c $(LUA) >$@.tmp && mv $@.tmp $@

$(BUILD)/version.txt: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = '$(DLOCKD_VERSION) $(DLOCKD_RELEASE) $(DLOCKD_REVISION)' ] || \
		echo '$(DLOCKD_VERSION) $(DLOCKD_RELEASE) $(DLOCKD_REVISION)' >$@
$(BUILD)/service/base/version.o: $(BUILD)/version.txt
$(BUILD)/service/base/version.o: ALL_CFLAGS += -DDLOCKD_VERSION='"$(DLOCKD_VERSION)"' \
	-DDLOCKD_RELEASE='"$(DLOCKD_RELEASE)"' -DDLOCKD_REVISION='"$(DLOCKD_REVISION)"'

$(BUILD)/lua_scripts.o: $(BUILD)/lua_scripts.c $(BUILD)/lua_scripts.h | deps-build
	$(CC) $(ALL_CFLAGS) $(WARN) -c -o $@ $<

# openapi.yaml, embedded so that GET /openapi.yaml serves the contract of
# exactly this binary.
$(BUILD)/openapi_doc.c: openapi.yaml Makefile
	@mkdir -p $(@D)
	@{ echo '/* generated from openapi.yaml by the Makefile; do not edit */'; \
	  echo '#include <stddef.h>'; \
	  echo 'extern const char openapi_doc[]; extern const size_t openapi_doc_len;'; \
	  echo 'const char openapi_doc[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/\t"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; \
	  echo 'const size_t openapi_doc_len = sizeof(openapi_doc) - 1;'; \
	} > $@.tmp && mv $@.tmp $@

$(BUILD)/openapi_doc.o: $(BUILD)/openapi_doc.c | deps-build
	$(CC) $(ALL_CFLAGS) $(WARN) -Wno-missing-prototypes -Wno-overlength-strings -c -o $@ $<

# The status page (/ui): the files of api/ui/, embedded the same way
# (api/ui/gen-assets.sh: each file's path, Content-Type, ETag and bytes).
UI_FILES = api/ui/index.html $(sort $(wildcard api/ui/*.js api/ui/*.css api/ui/*.svg))
$(BUILD)/ui_assets.c: api/ui/gen-assets.sh $(UI_FILES) Makefile
	@mkdir -p $(@D)
	@sh api/ui/gen-assets.sh $(UI_FILES) >$@.tmp && mv $@.tmp $@

$(BUILD)/ui_assets.o: $(BUILD)/ui_assets.c api/ui_assets.h | deps-build
	$(CC) $(ALL_CFLAGS) $(WARN) -Wno-overlength-strings -c -o $@ $<

# Unit tests include the module under test (tests/unit/test_x.c includes
# service/x.c or api/x.c), so they link everything but that module (and
# UNIT_ALSO, the modules a test includes besides). Where a test mocks a
# neighbour, --wrap reroutes just that symbol.
$(BUILD)/tests/test_locks: UNIT_ALSO = $(BUILD)/service/lock/listing.o
$(BUILD)/tests/test_locks: UNIT_WRAP = -Wl,--wrap=scripts_run -Wl,--wrap=waiters_lease_ends \
	-Wl,--wrap=redis_conn_send -Wl,--wrap=redis_conn_send_slot -Wl,--wrap=redis_conn_is_cluster
$(BUILD)/tests/test_scripts: UNIT_WRAP = -Wl,--wrap=redis_conn_send -Wl,--wrap=redis_conn_send_from \
	-Wl,--wrap=redis_conn_send_slot
$(BUILD)/tests/test_params: UNIT_WRAP = -Wl,--wrap=MHD_get_connection_values \
	-Wl,--wrap=reply_error
$(BUILD)/tests/test_reply: UNIT_WRAP = -Wl,--wrap=MHD_create_response_from_buffer \
	-Wl,--wrap=MHD_add_response_header -Wl,--wrap=MHD_queue_response \
	-Wl,--wrap=MHD_destroy_response
# test_acquire injects every collaborator of the acquire machine
# (struct acquire_ops), test_list tests a header: they link nothing of dlockd.
$(BUILD)/tests/test_acquire $(BUILD)/tests/test_list: $(BUILD)/tests/%: tests/unit/%.c | deps
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(WARN) -Wno-missing-prototypes -MMD -MP -o $@ $< \
		$(ALL_LDFLAGS) $(TEST_LIBS)
# The waiters and the subscriber are tested on their own event loop, with
# only the modules below them: they must not need the HTTP or lock layers.
WAITERS_TEST_OBJS = $(addprefix $(BUILD)/service/base/,loop.o heap.o util.o log.o names.o)
PUBSUB_TEST_OBJS = $(addprefix $(BUILD)/service/base/,loop.o heap.o util.o log.o names.o metrics.o \
	process_stats.o version.o) $(addprefix $(BUILD)/service/redis/,redis_blocking.o redis_dial.o redis_target.o \
	redis_url.o cluster_slots.o redis_tls.o redis_tls_session.o)
$(BUILD)/tests/test_waiters: DEP_OBJS = $(WAITERS_TEST_OBJS)
$(BUILD)/tests/test_pubsub: DEP_OBJS = $(PUBSUB_TEST_OBJS)
$(BUILD)/tests/test_waiters: tests/unit/test_waiters.c $(WAITERS_TEST_OBJS) | deps
$(BUILD)/tests/test_pubsub: tests/unit/test_pubsub.c $(PUBSUB_TEST_OBJS) | deps
$(BUILD)/tests/test_waiters $(BUILD)/tests/test_pubsub:
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) $(WARN) -Wno-missing-prototypes -MMD -MP -o $@ $< \
		$(DEP_OBJS) $(ALL_LDFLAGS) $(PKG_LIBS) $(TEST_LIBS)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(LIB_OBJS) | deps
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) $(WARN) -Wno-missing-prototypes -MMD -MP -o $@ $< \
		$(filter-out %/$*.o $(UNIT_ALSO),$(LIB_OBJS)) \
		$(ALL_LDFLAGS) $(UNIT_WRAP) $(PKG_LIBS) $(TEST_LIBS)

# test_redis_conn runs a node's connection (redis_node.c) on a real loop
# against a fake Redis of its own: it links the loop and what the
# connection uses, no more.
REDIS_CONN_TEST_OBJS = $(patsubst %,$(BUILD)/service/base/%.o,loop heap log util metrics \
	process_stats version) \
	$(patsubst %,$(BUILD)/service/redis/%.o,redis_dial redis_reply redis_target redis_tls \
	redis_tls_session redis_tls_io)
$(BUILD)/tests/test_redis_conn: tests/unit/test_redis_conn.c $(REDIS_CONN_TEST_OBJS) | deps
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) $(WARN) -Wno-missing-prototypes -MMD -MP -o $@ $< \
		$(REDIS_CONN_TEST_OBJS) $(ALL_LDFLAGS) $(PKG_LIBS) $(TEST_LIBS)

# dlock's option parsing, with the lease module it names kinds with.
DLOCK_ARGS_TEST_OBJS = $(BUILD)/cli/lease.o $(BUILD)/cli/client.o
$(BUILD)/tests/test_dlock_args: tests/unit/test_dlock_args.c $(DLOCK_ARGS_TEST_OBJS) | deps
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(WARN) -Wno-missing-prototypes -MMD -MP -o $@ $< \
		$(DLOCK_ARGS_TEST_OBJS) $(ALL_LDFLAGS) $(CLI_LIBS) $(TEST_LIBS)

$(ITEST_OBJS): | deps
# the cluster tests find names on a slot with dlockd's own key hashing
$(ITEST_BIN): $(ITEST_OBJS) $(BUILD)/service/redis/cluster_slots.o $(BUILD)/service/base/util.o
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

unit: deps $(UNIT_BINS)
integration: deps $(BUILD)/dlockd $(BUILD)/dlock $(ITEST_BIN)

# The contract checker and the OpenAPI linter (npm, pinned by the lockfile).
CONTRACT = tests/contract
contract-tools: $(CONTRACT)/node_modules/.done
$(CONTRACT)/node_modules/.done: $(CONTRACT)/package.json $(CONTRACT)/package-lock.json
	cd $(CONTRACT) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The status page's test (tests/ui/ui.test.mjs) drives Debian's chromium
# (TEST_PACKAGES) with puppeteer-core (npm, pinned by the lockfile; it
# downloads no browser). `make test` runs it last (tests/run.sh); test-ui
# runs only it; ui-screenshot runs it and saves the picture of the page
# docs/guides/status-page.md shows.
UI_TEST = tests/ui
ui-tools: $(UI_TEST)/node_modules/.done
$(UI_TEST)/node_modules/.done: $(UI_TEST)/package.json $(UI_TEST)/package-lock.json
	cd $(UI_TEST) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@
test-ui: deps $(BUILD)/dlockd ui-tools
	@sh tests/run.sh $(BUILD) ui
ui-screenshot: deps $(BUILD)/dlockd ui-tools
	@mkdir -p docs/img
	DLOCKD_UI_SCREENSHOT=docs/img/status-page.png node $(UI_TEST)/ui.test.mjs $(BUILD)

# The layers, on folders: service/base < redis < lock < config < api/ <
# main.c, cli/ on service/base/ only; api/ never speaks Redis, service/ never
# HTTP, lua/ never knows HTTP; no include circles, no namesake tags
# (tests/check-layers.sh; `make test` runs it first).
check-layers:
	@sh tests/check-layers.sh

# Every test; prints "N passed, M failed" last and fails if M > 0.
test: check-layers deps $(BUILD)/dlockd $(BUILD)/dlock $(UNIT_BINS) $(ITEST_BIN) contract-tools ui-tools
	@sh tests/run.sh $(BUILD)

# The Python client's tests (clients/python/README.md): python3 -m unittest
# against a redis-server and build/dlockd they start themselves, then the
# answers they got against openapi.yaml. `make test` runs them too
# (tests/run.sh).
.PHONY: test-python
test-python: deps $(BUILD)/dlockd contract-tools
	@sh tests/run.sh $(BUILD) python

# The client libraries' suites alone (clients/go, clients/node), against
# this build's dlockd and a redis-server of their own, and the answers
# they got against openapi.yaml; `make test` runs them too.
.PHONY: test-go test-node
test-go: deps $(BUILD)/dlockd contract-tools
	@sh tests/run.sh $(BUILD) go
test-node: deps $(BUILD)/dlockd contract-tools
	@sh tests/run.sh $(BUILD) node

# Every test with ASan and UBSan, then one short pass of the benchmark
# (bench/README.md, --quick: about a minute), its client and dlockd both
# sanitized: every scenario must measure without errors, every dlockd exit
# 0 (no sanitizer report), the JSON be read back whole.
test-asan:
	$(MAKE) test BUILD=build-asan SAN=1 CFLAGS="-O1 -g"
	$(MAKE) BUILD=build-asan SAN=1 CFLAGS="-O1 -g" build-asan/dlockd build-asan/bench/bench
	build-asan/bench/bench --quick --json build-asan/bench/quick.json build-asan/dlockd

# The integration suite with dlockd under valgrind (leaks and errors fail).
test-valgrind: deps $(BUILD)/dlockd $(BUILD)/dlock $(ITEST_BIN) contract-tools
	@command -v valgrind >/dev/null || apt-get install -y -q valgrind >/dev/null
	DLOCKD_PREFIX="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --quiet" \
		DLOCKD_SLOW=1 sh tests/run.sh $(BUILD) integration

# The fault suite and the abuse tests at full length: 32 clients, every
# phase three times longer, 100,000 names (`make test` runs them short).
# The network partitions among them make namespaces and TUN devices of
# their own: they need root (CAP_SYS_ADMIN, CAP_NET_ADMIN, /dev/net/tun)
# and say "# SKIP" with the reason where they cannot.
# Figures and how to read them: tests/RELIABILITY.md.
chaos: deps $(BUILD)/dlockd $(ITEST_BIN)
	DLOCKD_CHAOS=full DLOCKD_BIN=$(BUILD)/dlockd $(ITEST_BIN) chaos_ abuse_ a_call_redis

# The binaries, the API contract, the systemd unit (ExecStart pointed at
# $(PREFIX)/bin/dlockd; $(PREFIX)/lib/systemd/system is on systemd's unit
# path for /usr/local and /usr), and examples of the environment file and
# of the auth drop-in, under $(DESTDIR)$(PREFIX); nothing goes to /etc.
# install-strip (GNU's name) strips the binaries: the Docker image is built
# with it.
INSTALL_PROGRAM = install -m 755
UNIT_DIR = $(PREFIX)/lib/systemd/system
install: $(BUILD)/dlockd $(BUILD)/dlock $(BUILD)/dlockd.service
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/dlockd $(DESTDIR)$(UNIT_DIR)
	$(INSTALL_PROGRAM) $(BUILD)/dlockd $(DESTDIR)$(PREFIX)/bin/dlockd
	$(INSTALL_PROGRAM) $(BUILD)/dlock $(DESTDIR)$(PREFIX)/bin/dlock
	install -m 644 openapi.yaml $(DESTDIR)$(PREFIX)/share/dlockd/openapi.yaml
	install -m 644 $(BUILD)/dlockd.service $(DESTDIR)$(UNIT_DIR)/dlockd.service
	install -m 644 deploy/systemd/dlockd.env.example \
		$(DESTDIR)$(PREFIX)/share/dlockd/dlockd.env.example
	install -m 644 deploy/systemd/auth.conf $(DESTDIR)$(PREFIX)/share/dlockd/auth.conf.example
	install -m 644 deploy/systemd/tls.conf $(DESTDIR)$(PREFIX)/share/dlockd/tls.conf.example
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 cli/dlock.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/dlock
	install -d $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(BUILD)/dlockd.8 $(DESTDIR)$(PREFIX)/share/man/man8/dlockd.8
	install -m 644 $(BUILD)/dlock.1 $(DESTDIR)$(PREFIX)/share/man/man1/dlock.1
install-strip:
	$(MAKE) install INSTALL_PROGRAM='install -m 755 -s'

# The man pages and the references of docs/reference/, made from the one
# table of each binary's options: dlockd's rows (service/config/config.c;
# its hidden --help-format=man|markdown prints them) and dlock's help text
# (cli/dlock.c, read by cli/gen-doc.sh). `make docs` rewrites the
# committed references; tests/check-reference.sh (make lint, and the
# integration suite) fails when they are stale or a man page warns.
MAN_PAGES = $(BUILD)/dlockd.8 $(BUILD)/dlock.1
man install: $(MAN_PAGES)
$(BUILD)/dlockd.8: $(BUILD)/dlockd
	$(BUILD)/dlockd --help-format=man >$@.tmp && mv $@.tmp $@
$(BUILD)/dlock.1: $(BUILD)/dlock cli/gen-doc.sh VERSION
	$(BUILD)/dlock --help | sh cli/gen-doc.sh man '$(DLOCKD_RELEASE)' >$@.tmp && mv $@.tmp $@
docs: $(BUILD)/dlockd $(BUILD)/dlock
	@mkdir -p docs/reference
	$(BUILD)/dlockd --help-format=markdown >docs/reference/configuration.md
	$(BUILD)/dlock --help | sh cli/gen-doc.sh markdown >docs/reference/dlock.md

# The unit as installed: deploy/systemd/dlockd.service names
# /usr/local/bin/dlockd, the default PREFIX's.
$(BUILD)/dlockd.service: deploy/systemd/dlockd.service FORCE
	@mkdir -p $(@D)
	@sed 's|/usr/local/bin/dlockd|$(PREFIX)/bin/dlockd|' $< >$@.tmp && \
		{ cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@; }

# The Markdown's relative links and anchors (tests/check-doc-links.sh),
# every command block of README.md and docs/ run by a test or saying why
# not (tests/check-doc-commands.sh; test_docs.c runs them), the HTTP
# reference against openapi.yaml's routes (tests/check-doc-api.sh),
# the OpenAPI document (Redocly), the YAML of deploy/, the Kubernetes
# manifests against the Kubernetes schema and Pod Security "restricted"
# (deploy/validate-k8s.mjs, on each overlay as kubectl kustomize renders it,
# or without kubectl, which Debian 12 does not package, as its built-in
# renderer of the kustomize subset the overlays use does; --self-test
# checks that renderer against kubectl when there and what it refuses),
# the alert rules (promtool) and what the dashboard and rules query
# (deploy/check-monitoring.mjs), the systemd unit (systemd-analyze verify and
# security), and the image's runtime libraries against what the binaries
# link to.
lint: deps-lint contract-tools deploy-tools $(BUILD)/dlockd $(BUILD)/dlock
	sh tests/check-doc-links.sh --self-test
	sh tests/check-doc-commands.sh --self-test
	sh tests/check-doc-api.sh --self-test
	sh tests/check-reference.sh $(BUILD)
	yamllint -s -c .yamllint openapi.yaml deploy
	$(CONTRACT)/node_modules/.bin/redocly lint --format=stylish openapi.yaml
	node deploy/validate-k8s.mjs --self-test
	node deploy/validate-k8s.mjs
	sh deploy/check-systemd.sh $(BUILD)/dlockd
	@# the alert rules and their unit tests, and that the dashboard and the
	@# rules name only metrics a running dlockd exports
	promtool check rules deploy/prometheus/dlockd-alerts.yaml
	promtool test rules deploy/prometheus/dlockd-alerts.test.yaml
	node deploy/check-monitoring.mjs $(BUILD)/dlockd
	sh deploy/check-image.sh $(BUILD)/dlockd $(BUILD)/dlock
	@# the Compose file against Compose's own schema (docker-compose 1.x
	@# parses it without an engine; no recommends: no Docker engine either)
	@command -v docker-compose >/dev/null || { SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get install -y -q --no-install-recommends docker-compose >/dev/null; }
	docker-compose -f deploy/docker-compose.yml config -q

# kubernetes-models and yaml for deploy/validate-k8s.mjs (npm, pinned by
# deploy/package-lock.json).
deploy-tools: deploy/node_modules/.done
deploy/node_modules/.done: deploy/package.json deploy/package-lock.json
	cd deploy && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The benchmark: dlockd against the same scripts over hiredis (bench/README.md).
BENCH_BIN = $(BUILD)/bench/bench
$(BENCH_BIN): bench/bench.c $(BUILD)/lua_scripts.o
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) $(WARN) -Wno-missing-prototypes -o $@ $^ \
		$(ALL_LDFLAGS) $(PKG_LIBS)
bench: deps $(BUILD)/dlockd $(BENCH_BIN)
	$(BENCH_BIN) $(BUILD)/dlockd

# dlockd beside the locks a user would pick instead (bench/peers/peers.py,
# bench/README.md "Peers"): etcd's v3lock, redis-py's Lock, Node's redlock
# and redis-semaphore (npm, pinned by bench/peers/package-lock.json) and
# Redisson's own scripts; a few minutes, not part of make test. Debian's
# python3 has python3-redis.
PEERS_PACKAGES = redis-server etcd-server python3 python3-redis nodejs npm
bench-peers: deps-peers $(BUILD)/dlockd bench/peers/node_modules/.done
	python3 bench/peers/peers.py --dlockd $(BUILD)/dlockd --json bench/results/peers.json
bench/peers/node_modules/.done: bench/peers/package.json bench/peers/package-lock.json
	cd bench/peers && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# libFuzzer on request routing, validation and parameter/JSON parsing
# (tests/fuzz/). Runs FUZZ_SECONDS (~10 million inputs at 300 s on 2 cores)
# on a scratch copy of the seed corpus; a crash, leak or UB report is saved
# as build-fuzz/crash-* / leak-* and fails the target.
FUZZ_SECONDS ?= 300
FUZZ_BIN = build-fuzz/fuzz_request
FUZZ_FLAGS = -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all
$(FUZZ_BIN): tests/fuzz/fuzz_request.c api/params.c api/routes.c api/*.h service/*/*.h | deps-fuzz
	@mkdir -p $(@D)
	clang $(FUZZ_FLAGS) -I. $(PKG_CFLAGS) -o $@ $< \
		-Wl,--wrap=MHD_get_connection_values -Wl,--wrap=reply_error $(PKG_LIBS)
fuzz: deps-fuzz $(FUZZ_BIN)
	@rm -rf build-fuzz/corpus && cp -r tests/fuzz/corpus build-fuzz/corpus
	cd build-fuzz && ./fuzz_request -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-print_final_stats=1 corpus

# Build, start a private redis-server unless DLOCKD_REDIS_URL is set, serve
# until Ctrl-C or SIGTERM (deploy/run-local.sh); DLOCKD_* variables set
# dlockd's settings (DLOCKD_LISTEN=127.0.0.1:9090 make run).
run: deps-run $(BUILD)/dlockd $(BUILD)/dlock
	@sh deploy/run-local.sh $(BUILD)/dlockd

# A source tarball, $(BUILD)/dlockd-VERSION.tar.gz: the files git tracks
# at HEAD (outside git: the tree without build output), under
# dlockd-VERSION/; it builds with `make run` and `make test` as a checkout
# does (its version without a commit).
DIST = dlockd-$(DLOCKD_RELEASE)
dist:
	@mkdir -p $(BUILD)
	@if [ -e .git ]; then git archive --format=tar --prefix=$(DIST)/ HEAD; \
	else tar --exclude='./build*' --exclude=node_modules --exclude=./.git \
		--transform 's|^\.|$(DIST)|' -cf - .; fi | gzip -9 >$(BUILD)/$(DIST).tar.gz.tmp
	@mv $(BUILD)/$(DIST).tar.gz.tmp $(BUILD)/$(DIST).tar.gz
	@echo $(BUILD)/$(DIST).tar.gz

clean:
	rm -rf build build-asan build-fuzz $(CONTRACT)/node_modules deploy/node_modules \
		$(UI_TEST)/node_modules bench/peers/node_modules

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
