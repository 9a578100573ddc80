#!/bin/sh
# gen-scripts.sh -- dlockd's table of Lua scripts, generated from lua/ (the
# Makefile runs it into $(BUILD)/; nothing else lists the scripts).
#   sh lua/gen-scripts.sh h lua/*.lua >lua_scripts.h   enum script_id
#   sh lua/gen-scripts.sh c lua/*.lua >lua_scripts.c   their sources, and
#                                                     the library of functions
# Each lua/<name>.lua is one script: its id is SCRIPT_<NAME> (lock_acquire
# is SCRIPT_LOCK_ACQUIRE), its entry lua_sources[SCRIPT_<NAME>] holds its
# name and source. Adding a script is adding its file.
#
# A script's opening --[[ ]] comment names the libraries of lua/lib/ it is
# built with, on a line of its own:
#     libs: common rw
# Their sources are prepended in that order (a library may use those
# before it), then the script's own. common comes first, in every script:
# it refuses a call past its deadline and reads the publish command, the
# two arguments scripts_run() adds to every call (call_begin, which this
# puts before the script's own first line). The header depends only on the
# scripts' names, so the Makefile rewrites it only when a script comes or
# goes; the .c on every script and library.
#
# The same scripts also make one library of Redis functions (FUNCTION
# LOAD, Redis 7), lua_library: every library once, in the order the
# scripts name them, then each script as the function <lib>_<script>
# (lua_sources[].function), its body that of the script. Its name,
# dlockd_<16 hex digits of its SHA-1>, changes with its text, so dlockd
# builds that differ never share one. A function's library locals are made
# once, when Redis loads it: a script made them on every call (about half
# of what the call cost Redis). A line
#     flags: allow-oom
# in a script's opening comment gives its function those flags (Redis
# refuses a function without allow-oom when over its maxmemory; see
# service/lock/scripts.c).
set -eu

die() {
	echo "gen-scripts.sh: $*" >&2
	exit 1
}

mode=${1:-}
[ "$mode" = h ] || [ "$mode" = c ] || die "usage: gen-scripts.sh h|c lua/<name>.lua..."
shift

# The script's name, checked to make a C identifier.
name_of() {
	n=$(basename "$1" .lua)
	case $n in
	'' | [!a-z]* | *[!a-z0-9_]*) die "$1: a script's name is [a-z][a-z0-9_]*" ;;
	esac
	echo "$n"
}

# The libs: line of the opening comment of script $1 (empty without one).
libs_of() {
	awk 'NR == 1 && !/^--\[\[/ { exit }
	     /^[ \t]*libs:/ { sub(/^[ \t]*libs:[ \t]*/, ""); print; exit }
	     /\]\]/ { exit }' "$1"
}

# The flags: line of the opening comment of script $1 (empty without one).
flags_of() {
	awk 'NR == 1 && !/^--\[\[/ { exit }
	     /^[ \t]*flags:/ { sub(/^[ \t]*flags:[ \t]*/, ""); print; exit }
	     /\]\]/ { exit }' "$1"
}

# The names a library defines at its top level (local NAME, local
# function NAME), one a line.
defined_in() {
	awk '/^local[ \t]+function[ \t]/ { sub(/^local[ \t]+function[ \t]+/, "");
					    sub(/[^A-Za-z0-9_].*/, ""); print; next }
	     /^local[ \t]/ { sub(/^local[ \t]+/, ""); sub(/=.*/, ""); gsub(/[ \t]/, "");
			     n = split($0, a, ","); for (i = 1; i <= n; i++) print a[i] }' "$1"
}

# Lines of text as the lines of a C string literal.
c_string() {
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/\t  "/' -e 's/$/\\n"/' "$@"
}

if [ "$mode" = h ]; then
	echo '/* lua_scripts.h -- generated from lua/ by lua/gen-scripts.sh; do not edit. */'
	echo '#ifndef DLOCKD_LUA_SCRIPTS_H'
	echo '#define DLOCKD_LUA_SCRIPTS_H'
	echo
	echo '/* One per lua/<name>.lua: SCRIPT_<NAME>. */'
	echo 'enum script_id {'
	for f in "$@"; do
		n=$(name_of "$f")
		printf '\tSCRIPT_%s,\n' "$(echo "$n" | tr a-z A-Z)"
	done
	echo '	SCRIPT_COUNT'
	echo '};'
	echo
	echo '/* Each script by id: its name ("lock_acquire"), its function'"'"'s name and'
	echo ' * its source, its libraries first. scripts.c indexes it by id; bench/bench.c, which'
	echo ' * declares it itself, looks names up (lua_sources_count of them). */'
	echo 'struct lua_source {'
	echo '	const char *name;'
	echo '	const char *function;	/* its name in lua_library */'
	echo '	const char *source;'
	echo '};'
	echo 'extern const struct lua_source lua_sources[SCRIPT_COUNT];'
	echo 'extern const unsigned lua_sources_count;'
	echo
	echo '/* Every script as a function of one library (FUNCTION LOAD), and the'
	echo ' * library'"'"'s name. */'
	echo 'extern const char lua_library[];'
	echo 'extern const char lua_library_name[];'
	echo
	echo '#endif'
	exit 0
fi

# Each call's start, between the libraries and the script's own lines.
CALL_BEGIN='do local late = call_begin(ARGV) if late then return late end end'

# The libraries each script names, checked; and all of them, in the order
# the scripts name them (each script's in its own order).
order=
for f in "$@"; do
	dir=$(dirname "$f")
	libs=$(libs_of "$f")
	case "$libs " in
	'common '*) ;;
	*) die "$f: its opening comment needs a line 'libs: common ...'" ;;
	esac
	seen=
	for lib in $libs; do
		case " $seen " in
		*" $lib "*) die "$f: library $lib listed twice" ;;
		esac
		[ -f "$dir/lib/$lib.lua" ] || die "$f: no library $dir/lib/$lib.lua"
		seen="$seen $lib"
		case " $order " in
		*" $lib "*) ;;
		*) order="$order $lib" ;;
		esac
	done
done
for f in "$@"; do
	at=0
	for lib in $(libs_of "$f"); do
		i=0
		for o in $order; do
			i=$((i + 1))
			[ "$o" = "$lib" ] && break
		done
		[ "$i" -gt "$at" ] || die "$f: libraries named in another order than other scripts name them"
		at=$i
	done
done
dir=$(dirname "$1")
dups=$(for lib in $order; do defined_in "$dir/lib/$lib.lua"; done | sort | uniq -d)
[ -z "$dups" ] || die "a name defined by two libraries: $dups"

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
	for lib in $order; do
		awk 1 "$dir/lib/$lib.lua"	# awk 1: every line ends in a newline
	done
	for f in "$@"; do
		n=$(name_of "$f")
		fl=
		for x in $(flags_of "$f"); do
			case $x in
			no-writes | allow-oom | allow-stale | no-cluster | allow-cross-slot-keys) ;;
			*) die "$f: no function flag $x" ;;
			esac
			fl="$fl'$x', "
		done
		echo "redis.register_function{function_name = '@LIB@_$n', flags = {${fl%, }},"
		echo '  callback = function(KEYS, ARGV)'
		echo "$CALL_BEGIN"
		awk 1 "$f"
		echo 'end}'
	done
} >"$tmp"
lib=dlockd_$(sha1sum "$tmp" | cut -c1-16)

echo '/* lua_scripts.c -- generated from lua/ by lua/gen-scripts.sh; do not edit. */'
echo '#include "lua_scripts.h"'
echo
echo 'const struct lua_source lua_sources[SCRIPT_COUNT] = {'
for f in "$@"; do
	n=$(name_of "$f")
	files=
	for lib_of in $(libs_of "$f"); do
		files="$files $dir/lib/$lib_of.lua"
	done
	printf '\t[SCRIPT_%s] = { "%s", "%s_%s",\n' "$(echo "$n" | tr a-z A-Z)" "$n" "$lib" "$n"
	# shellcheck disable=SC2086 # $files: paths without blanks, split on purpose
	{ awk 1 $files; echo "$CALL_BEGIN"; awk 1 "$f"; } | c_string
	printf '\t},\n'
done
echo '};'
echo 'const unsigned lua_sources_count = SCRIPT_COUNT;'
echo
echo "const char lua_library_name[] = \"$lib\";"
echo 'const char lua_library[] ='
{ echo "#!lua name=$lib"; sed "s/@LIB@/$lib/g" "$tmp"; } | c_string
echo ';'
