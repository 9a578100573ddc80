#!/bin/sh
# check-layers.sh -- the layers of docs/internals/architecture.md, checked on the
# sources, folder by folder:
#   - the order service/base < service/redis < service/lock < service/config
#     < api/ < main.c: a file includes ("...") only headers of its own folder
#     or of a lower one; cli/, the dlock client, only its own and
#     service/base/;
#   - api/ never speaks Redis: no hiredis, nothing of service/redis/ or
#     service/lock/scripts.h, no redis*() call, redisType, redis_conn_* or
#     scripts_run (it calls the lock domain);
#   - service/ knows no HTTP (no microhttpd), service/base/ no Redis (no
#     hiredis), lua/ never knows HTTP;
#   - no import circle: a module (a header and the .c of the same name, or
#     a .c without one that includes a header of its folder first, as
#     api/handle_*.c do api/handlers.h) that reaches itself through includes;
#   - no namesakes: a struct, union or enum tag or a static function
#     defined under one name in two files of service/, api/ and main.c
#     (a debugger's breakpoint, a tag jump or a grep lands in one place).
# Comments and string literals are not code here. Prints each violation as
# "layers: <rule>: file:line: <the line>" and exits 1 if there is one.
#   sh tests/check-layers.sh [ROOT]          check the tree at ROOT (default .)
#   sh tests/check-layers.sh --self-test     plant a violation of each rule in
#                                            a scratch copy; each must be
#                                            found; then check the tree
set -u

# scan: one tab-separated record per file (F file), per include (I file
# line "q"|"a" target text; a quoted one resolved as the compiler does:
# next to the file, else from the root) and per line of code (C file line
# code text; the code with comments blanked and string and character
# literals emptied). Run in the root, on the files named.
scan() {
	awk '
	function exists(p,   l, r) {
		r = (getline l < p)
		if (r >= 0)
			close(p)
		return r >= 0
	}
	function norm(p,   n, a, i, k, st, out) {	# a/./b, a/x/../b -> a/b
		n = split(p, a, "/")
		k = 0
		for (i = 1; i <= n; i++)
			if (a[i] == ".." && k > 0 && st[k] != "..")
				k--
			else if (a[i] != "." && a[i] != "")
				st[++k] = a[i]
		out = st[1]
		for (i = 2; i <= k; i++)
			out = out "/" st[i]
		return out
	}
	function tidy(s) {
		gsub(/\t/, " ", s)
		sub(/^ +/, "", s)
		sub(/ +$/, "", s)
		return s
	}
	FNR == 1 {
		incom = 0
		dir = FILENAME
		if (!sub(/\/[^\/]*$/, "", dir))
			dir = "."
		print "F\t" FILENAME
	}
	{
		raw = $0
		code = ""
		rest = raw
		while (rest != "") {
			if (incom) {
				p = index(rest, "*/")
				if (!p)
					break
				code = code " "
				rest = substr(rest, p + 2)
				incom = 0
				continue
			}
			if (!match(rest, /\/\*|\/\/|["\047]/)) {
				code = code rest
				break
			}
			code = code substr(rest, 1, RSTART - 1)
			tok = substr(rest, RSTART, RLENGTH)
			rest = substr(rest, RSTART + RLENGTH)
			if (tok == "//")
				break
			if (tok == "/*") {
				code = code "  "
				incom = 1
				continue
			}
			# a literal: skip to its closing quote
			while (rest != "") {
				c = substr(rest, 1, 1)
				rest = substr(rest, c == "\\" ? 3 : 2)
				if (c == tok)
					break
			}
			code = code tok tok
		}
		if (code ~ /^[ \t]*#[ \t]*include/) {
			t = raw
			if (sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", t) && sub(/".*/, "", t)) {
				k = "q"
				t = exists(dir "/" t) ? norm(dir "/" t) : norm(t)
			} else if (sub(/^[ \t]*#[ \t]*include[ \t]*</, "", t) && sub(/>.*/, "", t)) {
				k = "a"
			} else
				next
			print "I\t" FILENAME "\t" FNR "\t" k "\t" t "\t" tidy(raw)
			next
		}
		if (code ~ /[^ \t]/)
			print "C\t" FILENAME "\t" FNR "\t" tidy(code) "\t" tidy(raw)
	}' "$@"
}

# Each rule reads the scan and prints "rule<TAB>file<TAB>line<TAB>text".

rule_order() {	# the folders' order; cli/ on service/base/ only
	awk -F '\t' '
	function folder(p) { return sub(/\/[^\/]*$/, "", p) ? p : "." }
	function name(d) { return d == "." ? "main.c" : d "/" }
	BEGIN {
		rank["service/base"] = 0; rank["service/redis"] = 1
		rank["service/lock"] = 2; rank["service/config"] = 3
		rank["api"] = 4; rank["."] = 5
	}
	$1 == "I" && $4 == "q" {
		from = folder($2)
		to = folder($5)
		# the script table lua/gen-scripts.sh generates into the build
		# directory, for the script runner (service/lock/scripts.h) alone
		if ($5 == "lua_scripts.h")
			to = "lua"
		if (from == to)
			next
		if (to == "lua")
			why = from == "service/lock" ? "" : name(from) " includes the generated script table (service/lock/ only)"
		else if (from == "cli")
			why = to == "service/base" ? "" : "cli/ includes " name(to) " (only service/base/)"
		else if (!(from in rank))
			why = ""
		else if (!(to in rank))
			why = name(from) " includes " name(to) ", outside the layers"
		else
			why = rank[to] > rank[from] ? name(from) " includes " name(to) ", a higher layer" : ""
		if (why != "")
			print why "\t" $2 "\t" $3 "\t" $6
	}' "$1"
}

rule_api_redis() {	# the HTTP edge never speaks Redis
	awk -F '\t' '
	$2 !~ /^api\// { next }
	$1 == "I" && ($5 ~ /(^|\/)hiredis/ || $5 ~ /^service\/redis\// ||
		      $5 == "service/lock/scripts.h") {
		print "api/ speaks Redis\t" $2 "\t" $3 "\t" $6
	}
	$1 == "C" && ($4 ~ /(^|[^A-Za-z0-9_])(redis[A-Z][A-Za-z0-9_]*|redis_conn_[A-Za-z0-9_]+|scripts_run)([^A-Za-z0-9_]|$)/ ||
		      $4 ~ /(^|[^A-Za-z0-9_])redis[A-Za-z0-9_]*[ \t]*\(/) {
		print "api/ speaks Redis\t" $2 "\t" $3 "\t" $5
	}' "$1"
}

rule_libraries() {	# service/ knows no HTTP, service/base/ no Redis
	awk -F '\t' '
	$1 == "I" && $2 ~ /^service\// && $5 ~ /(^|\/)microhttpd\.h$/ {
		print "service/ knows HTTP (microhttpd)\t" $2 "\t" $3 "\t" $6
	}
	$1 == "I" && $2 ~ /^service\/base\// && $5 ~ /(^|\/)hiredis/ {
		print "service/base/ speaks Redis (hiredis)\t" $2 "\t" $3 "\t" $6
	}' "$1"
}

rule_circles() {	# every include that lies on a circle of modules
	awk -F '\t' '
	function folder(p) { return sub(/\/[^\/]*$/, "", p) ? p : "." }
	function stem(p) { sub(/\.[ch]$/, "", p); return p }
	function way(s, t,   q, head, tail, prev, seen, x, n, i, nb, p) {
		# the shortest way from s to t, as "s -> ... -> t"
		q[tail = 1] = s
		seen[s] = 1
		for (head = 1; head <= tail && !(t in seen); head++) {
			x = q[head]
			n = split(adj[x], nb, " ")
			for (i = 1; i <= n; i++)
				if (!(nb[i] in seen)) {
					seen[nb[i]] = 1
					prev[nb[i]] = x
					q[++tail] = nb[i]
				}
		}
		for (p = t; p != s; p = prev[p])
			t = prev[p] " -> " t
		return t
	}
	$1 == "F" { isfile[$2] = 1; files[++nf] = $2 }
	$1 == "I" && $4 == "q" {
		if (!($2 in first))
			first[$2] = $5
		inc[++ni] = $2 "\t" $3 "\t" $5 "\t" $6
	}
	END {
		for (i = 1; i <= nf; i++) {
			f = files[i]
			m = stem(f)
			if (f ~ /\.c$/ && !((m ".h") in isfile) && (f in first) &&
			    folder(first[f]) == folder(f))
				m = stem(first[f])
			mod[f] = m
		}
		for (i = 1; i <= ni; i++) {	# the edges between modules
			split(inc[i], r, "\t")
			if (!(r[3] in isfile) || mod[r[1]] == mod[r[3]])
				continue
			u = from[++ne] = mod[r[1]]
			v = to[ne] = mod[r[3]]
			at[ne] = r[1] "\t" r[2] "\t" r[4]
			node[u] = node[v] = 1
			if (!((u, v) in reach)) {
				reach[u, v] = 1
				adj[u] = adj[u] " " v
			}
		}
		for (k in node)
			for (a in node)
				if ((a, k) in reach)
					for (b in node)
						if ((k, b) in reach)
							reach[a, b] = 1
		for (e = 1; e <= ne; e++)	# an edge back is a circle
			if ((to[e], from[e]) in reach)
				print "import circle " from[e] " -> " way(to[e], from[e]) "\t" at[e]
	}' "$1"
}

rule_namesakes() {	# a tag or static function name defined in two files
	awk -F '\t' '
	function define(name, tag) {
		if (!(name in where))
			names[++nn] = name
		else if (index(" " where[name] " ", " " $2 " ") == 0)
			multi[name] = 1
		if (index(" " where[name] " ", " " $2 " ") == 0)
			where[name] = where[name] " " $2
		defs[name] = defs[name] $2 "\t" line "\t" text "\n"
	}
	function fn(decl,   end, head, p) {	# the name a static definition defines
		gsub(/__attribute__[ \t]*\(\([^)]*\)\)/, "", decl)
		if (!match(decl, /[;{]/))
			return ""
		end = substr(decl, RSTART, 1)
		head = substr(decl, 1, RSTART - 1)
		p = index(head, "(")
		if (end != "{" || !p || index(substr(head, 1, p), "=") ||
		    substr(head, p + 1) ~ /^[ \t]*\*/)
			return ""
		head = substr(head, 1, p - 1)
		sub(/[ \t]+$/, "", head)
		return match(head, /[A-Za-z_][A-Za-z0-9_]*$/) ? substr(head, RSTART) : ""
	}
	$1 != "C" || $2 !~ /^(service\/|api\/|main\.c$)/ { next }
	$2 != cur { cur = $2; depth = 0; decl = "" }
	{
		code = $4
		s = code
		while (match(s, /(^|[^A-Za-z0-9_])(struct|union|enum)[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*\{/)) {
			t = substr(s, RSTART, RLENGTH)
			s = substr(s, RSTART + RLENGTH)
			sub(/[ \t]*\{$/, "", t)
			sub(/.*[ \t]/, "", t)
			line = $3; text = $5
			define(t, 1)
		}
		if (decl == "" && depth == 0 && code ~ /^static([^A-Za-z0-9_]|$)/) {
			dline = $3
			dtext = $5
		}
		if (decl != "" || (depth == 0 && code ~ /^static([^A-Za-z0-9_]|$)/)) {
			decl = decl " " code
			if (decl ~ /[;{]/) {
				t = fn(decl)
				decl = ""
				if (t != "") {
					line = dline; text = dtext
					define(t, 0)
				}
			}
		}
		depth += gsub(/\{/, "{", code) - gsub(/\}/, "}", code)
	}
	END {
		for (i = 1; i <= nn; i++)
			if (names[i] in multi) {
				n = split(defs[names[i]], d, "\n")
				for (j = 1; j < n; j++)
					print "namesake " names[i] " (defined in" where[names[i]] ")\t" d[j]
			}
	}' "$1"
}

# lua/ never knows HTTP: Lua code, comments dropped (--[[ ... ]] blocks and
# -- to the line's end)
rule_lua() {
	for f in lua/*.lua lua/lib/*.lua; do
		[ -e "$f" ] || continue
		awk -v f="$f" '
			blk { if (sub(/.*\]\]/, "")) blk = 0; else next }
			{ line = $0 }
			sub(/--\[\[.*/, "", line) { if ($0 !~ /\]\]/) blk = 1 }
			{ sub(/--.*/, "", line) }
			tolower(line) ~ /(^|[^a-z])http([^a-z]|$)|[^0-9a-z_](200|409|503)([^0-9]|$)/ {
				t = $0; gsub(/\t/, " ", t); sub(/^ +/, "", t)
				print "lua/ knows HTTP\t" f "\t" NR "\t" t }' "$f"
	done
}

check() {	# check ROOT: print the violations, exit 1 if any
	(
	cd "$1" || exit 2
	out=$(mktemp) || exit 2
	set --
	for f in service/*/*.[ch] api/*.[ch] ./*.[ch] cli/*.[ch]; do
		[ -e "$f" ] && set -- "$@" "${f#./}"
	done
	scan "$@" >"$out.scan"
	{
		rule_order "$out.scan"
		rule_api_redis "$out.scan"
		rule_libraries "$out.scan"
		rule_circles "$out.scan"
		rule_namesakes "$out.scan"
		rule_lua
	} | awk -F '\t' '{ print "layers: " $1 ": " $2 ":" $3 ": " $4 }' >"$out"
	cat "$out"
	[ ! -s "$out" ]
	rc=$?
	rm -f "$out" "$out.scan"
	exit $rc
	)
}

if [ "${1:-}" = --self-test ]; then
	here=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	fails=0
	# rule|file|line appended to it: the report must name file:line and rule
	for plant in \
	    'service/base/ includes service/redis/, a higher layer|service/base/util.c|#include "service/redis/redis_url.h"' \
	    'service/base/ includes service/lock/, a higher layer|service/base/log.c|#include "service/lock/locks.h"' \
	    'service/base/ includes api/, a higher layer|service/base/heap.c|#include "api/routes.h"' \
	    'service/redis/ includes service/lock/, a higher layer|service/redis/redis_url.c|#include "service/lock/waiters.h"' \
	    'service/redis/ includes service/config/, a higher layer|service/redis/cluster_slots.c|#include "service/config/config.h"' \
	    'service/lock/ includes service/config/, a higher layer|service/lock/watch.c|#include "service/config/config.h"' \
	    'service/lock/ includes api/, a higher layer|service/lock/locks.c|#include "api/reply.h"' \
	    'service/config/ includes api/, a higher layer|service/config/config.c|#include "api/server.h"' \
	    'service/lock/ includes cli/, outside the layers|service/lock/waiters.c|#include "cli/lease.h"' \
	    'api/ includes the generated script table|api/routes.c|#include "lua_scripts.h"' \
	    'cli/ includes service/lock/|cli/args.c|#include "service/lock/locks.h"' \
	    'cli/ includes api/|cli/run.c|#include "api/reply.h"' \
	    'api/ speaks Redis|api/handle_locks.c|#include "service/redis/redis_conn.h"' \
	    'api/ speaks Redis|api/handle_health.c|#include <hiredis/hiredis.h>' \
	    'api/ speaks Redis|api/params.c|#include "service/lock/scripts.h"' \
	    'api/ speaks Redis|api/server.c|static void x(void) { redis_conn_send(0, 0, 0, 0, 0, 0, 0); }' \
	    'api/ speaks Redis|api/routes.c|static void *y(void) { return redisCommand(0, "PING"); }' \
	    'service/base/ speaks Redis|service/base/names.c|#include <hiredis/hiredis.h>' \
	    'service/ knows HTTP|service/base/loop.c|#include <microhttpd.h>' \
	    'service/ knows HTTP|service/redis/redis_url.c|#include <microhttpd.h>' \
	    'lua/ knows HTTP|lua/lock_acquire.lua|return 409 -- HTTP conflict' \
	    'import circle|service/base/heap.h|#include "service/base/loop.h"' \
	    'import circle|cli/client.c|#include "args.h"' \
	    'namesake tunnel |api/routes.c|struct tunnel { int fd; };' \
	    'namesake tunnel |service/config/config.c|static void tunnel(void)' \
	    'namesake tv_ms |service/base/heap.c|static int tv_ms(void)' \
	    ; do
		rule=${plant%%|*}
		rest=${plant#*|}
		file=${rest%%|*}
		line=${rest#*|}
		rm -rf "$tmp/t" && mkdir -p "$tmp/t"
		cp -r "$here/service" "$here/api" "$here/lua" "$here/cli" "$here/main.c" "$tmp/t/"
		n=$(($(wc -l <"$tmp/t/$file") + 1))
		printf '%s\n' "$line" >>"$tmp/t/$file"
		case $line in static*\)) printf '{\n}\n' >>"$tmp/t/$file" ;; esac
		if check "$tmp/t" | grep -F ": $file:$n: " | grep -qF "layers: $rule"; then
			echo "ok - check-layers finds: $file: $line ($rule)"
		else
			echo "not ok - check-layers missed: $file: $line ($rule)"
			fails=1
		fi
	done
	if check "$here" >"$tmp/report"; then
		echo "ok - the tree itself passes"
	else
		list=$(awk 'match($0, /: [^ :]+:[0-9]+: /) {
				at = substr($0, RSTART + 2, RLENGTH - 4)
				if (!seen[at]++) { printf "%s%s", sep, at; sep = " " } }' "$tmp/report")
		echo "not ok - the tree itself fails: $list"
		sed 's/^/# /' "$tmp/report"
		fails=1
	fi
	exit $fails
fi

check "${1:-.}" && echo "layers: ok"
