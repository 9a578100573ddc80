#!/bin/sh
# check-layers.sh -- the layers of docs/ARCHITECTURE.md, checked on the
# sources: service/ never includes api/ (the lock domain knows no HTTP),
# api/ never speaks Redis (no hiredis, no Redis connection, script or
# subscriber internals: it calls the lock domain), lua/ never knows HTTP,
# and only main.c, the composition root, includes both. Prints each
# violation as file:line and exits 1 if there is one.
#   sh tests/check-layers.sh [ROOT]          check the tree at ROOT (default .)
#   sh tests/check-layers.sh --self-test     plant a violation of each rule in
#                                            a scratch copy; each must be found
set -u

check() {	# check ROOT
	root=$1
	bad=0
	report() {	# report <rule> <grep output>
		[ -n "$2" ] || return 0
		printf '%s\n' "$2" | sed "s|^$root/||; s|^|layers: $1: |"
		bad=1
	}
	report "service/ includes api/" \
		"$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(\.\./)?api/' "$root"/service/*/*.[ch] 2>/dev/null)"
	report "api/ speaks redis" \
		"$(grep -nE '#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?(hiredis|redis_conn\.h|redis_url\.h|scripts\.h|pubsub\.h)|\b(redis[A-Z][A-Za-z]*|redis_conn_[a-z_]+|scripts_run)\b' "$root"/api/*.[ch] 2>/dev/null)"
	# Lua code, comments dropped (--[[ ... ]] blocks and -- to the line's end)
	report "lua/ knows HTTP" \
		"$(for f in "$root"/lua/*.lua "$root"/lua/lib/*.lua; do
			awk -v f="$f" '
				blk { if (sub(/.*\]\]/, "")) blk = 0; else next }
				{ line = $0 }
				sub(/--\[\[.*/, "", line) { if ($0 !~ /\]\]/) blk = 1 }
				{ sub(/--.*/, "", line) }
				tolower(line) ~ /(^|[^a-z])http([^a-z]|$)|[^0-9a-z_](200|409|503)([^0-9]|$)/ {
					print f ":" NR ":" $0 }' "$f"
		done)"
	return $bad
}

if [ "${1:-}" = --self-test ]; then
	here=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	fails=0
	for plant in 'service/lock/locks.c:#include "api/reply.h"' \
		     'api/handle_locks.c:#include "service/redis/redis_conn.h"' \
		     'api/handle_health.c:#include <hiredis/hiredis.h>' \
		     'api/server.c:static void x(void) { redis_conn_send(0, 0, 0, 0, 0, 0, 0); }' \
		     'lua/lock_acquire.lua:return 409 -- HTTP conflict'; do
		rm -rf "$tmp/t" && mkdir -p "$tmp/t"
		cp -r "$here/service" "$here/api" "$here/lua" "$tmp/t/"
		printf '%s\n' "${plant#*:}" >>"$tmp/t/${plant%%:*}"
		if check "$tmp/t" >/dev/null; then
			echo "not ok - check-layers missed: $plant"
			fails=1
		else
			echo "ok - check-layers finds: $plant"
		fi
	done
	check "$here" >/dev/null && echo "ok - the tree itself passes" ||
		{ echo "not ok - the tree itself fails"; fails=1; }
	exit $fails
fi

check "${1:-.}" && echo "layers: ok"
