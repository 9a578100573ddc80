#!/bin/sh
# gen-scripts.sh -- dlockd's table of Lua scripts, generated from lua/ (the
# Makefile runs it into $(BUILD)/; nothing else lists the scripts).
#   sh lua/gen-scripts.sh h lua/*.lua >lua_scripts.h   enum script_id
#   sh lua/gen-scripts.sh c lua/*.lua >lua_scripts.c   their sources
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
# two arguments scripts_run() adds to every call. The header depends only
# on the scripts' names, so the Makefile rewrites it only when a script
# comes or goes; the .c on every script and library.
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
	echo '/* Each script by id: its name ("lock_acquire") and its source, its'
	echo ' * libraries first. scripts.c indexes it by id; bench/bench.c, which'
	echo ' * declares it itself, looks names up (lua_sources_count of them). */'
	echo 'struct lua_source {'
	echo '	const char *name;'
	echo '	const char *source;'
	echo '};'
	echo 'extern const struct lua_source lua_sources[SCRIPT_COUNT];'
	echo 'extern const unsigned lua_sources_count;'
	echo
	echo '#endif'
	exit 0
fi

echo '/* lua_scripts.c -- generated from lua/ by lua/gen-scripts.sh; do not edit. */'
echo '#include "lua_scripts.h"'
echo
echo 'const struct lua_source lua_sources[SCRIPT_COUNT] = {'
for f in "$@"; do
	n=$(name_of "$f")
	dir=$(dirname "$f")
	libs=$(libs_of "$f")
	case "$libs " in
	'common '*) ;;
	*) die "$f: its opening comment needs a line 'libs: common ...'" ;;
	esac
	files=
	for lib in $libs; do
		case " $files " in
		*" $dir/lib/$lib.lua "*) die "$f: library $lib listed twice" ;;
		esac
		[ -f "$dir/lib/$lib.lua" ] || die "$f: no library $dir/lib/$lib.lua"
		files="$files $dir/lib/$lib.lua"
	done
	printf '\t[SCRIPT_%s] = { "%s",\n' "$(echo "$n" | tr a-z A-Z)" "$n"
	# shellcheck disable=SC2086 # $files: paths without blanks, split on purpose
	c_string $files "$f"
	printf '\t},\n'
done
echo '};'
echo 'const unsigned lua_sources_count = SCRIPT_COUNT;'
