#!/bin/sh
# check-reference.sh -- the settings' reference, --help and the man pages
# agree, for dlockd and dlock:
#  - docs/reference/configuration.md and docs/reference/dlock.md are what
#    the binaries generate now (`make docs` rewrites them);
#  - dlockd.8 and dlock.1, generated as the Makefile does, render with
#    groff -man -ww without a warning;
#  - every option --help shows (and every DLOCKD_* variable) is in the man
#    page and the reference; every long option of dlock's getopt table
#    (cli/dlock.c) and every letter of its short options is in its --help.
# Prints "ok - ..." / "not ok - ..." lines and exits 1 on a failure;
# `make lint` and the integration suite (test_docs.c) run it.
#   sh tests/check-reference.sh [BUILD_DIR]
set -u
build=${1:-build}
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }

for b in dlockd dlock; do
	[ -x "$build/$b" ] || { echo "not ok - no $build/$b: build it first"; exit 1; }
done
command -v groff >/dev/null || { echo "not ok - no groff (Debian: groff-base)"; exit 1; }

"$build/dlockd" --help >"$tmp/dlockd.help" 2>&1 &&
"$build/dlockd" --help-format=markdown >"$tmp/configuration.md" &&
"$build/dlockd" --help-format=man >"$tmp/dlockd.8" &&
"$build/dlock" --help >"$tmp/dlock.help" 2>&1 &&
sh cli/gen-doc.sh markdown <"$tmp/dlock.help" >"$tmp/dlock.md" &&
sh cli/gen-doc.sh man "$(cat VERSION)" <"$tmp/dlock.help" >"$tmp/dlock.1" ||
	{ echo "not ok - the binaries generate their documents"; exit 1; }

# the committed references are current
for f in configuration.md dlock.md; do
	if diff -u "docs/reference/$f" "$tmp/$f" >"$tmp/diff"; then
		ok "docs/reference/$f is current"
	else
		cat "$tmp/diff"
		not_ok "docs/reference/$f is stale: run make docs and commit it"
	fi
done

# the man pages render without a warning; their text, plain, for the greps
for m in dlockd.8 dlock.1; do
	groff -man -Tutf8 -ww -P-cbou "$tmp/$m" 2>"$tmp/$m.warn" |
		sed 's/\xe2\x88\x92/-/g; s/\xe2\x80\x90/-/g' >"$tmp/$m.txt"
	if [ -s "$tmp/$m.warn" ]; then
		cat "$tmp/$m.warn"
		not_ok "$m renders with warnings"
	elif ! grep -q . "$tmp/$m.txt"; then
		not_ok "$m renders to nothing"
	else
		ok "$m renders without warnings"
	fi
done

# has FILE WORD...: every word (an option or a variable: letters, '-'
# and '_') is in FILE as a whole word; says which are missing
has() {
	f=$1
	shift
	missing=
	for w; do
		grep -qE -e "(^|[^A-Za-z_-])$w([^A-Za-z_-]|\$)" "$f" || missing="$missing $w"
	done
	[ -z "$missing" ] || echo "missing from $(basename "$f"):$missing"
	[ -z "$missing" ]
}

# dlockd: the options (the left column) and the variables of --help
d_opts=$(grep -E '^  -' "$tmp/dlockd.help" | sed 's/^  //; s/  .*//' |
	grep -oE -- '--?[a-zA-Z][a-z-]*' | sort -u)
d_envs=$(grep -oE 'DLOCKD_[A-Z_]+' "$tmp/dlockd.help" | sort -u)
[ "$(echo "$d_opts" | wc -w)" -ge 25 ] && [ "$(echo "$d_envs" | wc -w)" -ge 24 ] ||
	not_ok "dlockd --help lists its options (found: $d_opts)"
# shellcheck disable=SC2086
if has "$tmp/dlockd.8.txt" $d_opts $d_envs && has "$tmp/configuration.md" $d_opts $d_envs; then
	ok "every option and variable of dlockd --help is in dlockd.8 and configuration.md"
else
	not_ok "every option and variable of dlockd --help is in dlockd.8 and configuration.md"
fi

# dlock: its getopt table (long names, short letters) is its --help...
l_opts=$(sed -n '/longopts\[\] = {/,/^	};/p' cli/dlock.c | grep -oE '\{ "[a-z-]+"' |
	sed 's/{ "/--/; s/"//' | sort -u)
s_opts=$(grep -oE 'getopt_long\(argc, argv, "[^"]*"' cli/dlock.c |
	sed 's/.*"\(.*\)"/\1/' | tr -d '+:' | sed 's/./-& /g')
[ "$(echo "$l_opts" | wc -w)" -ge 15 ] && [ "$(echo "$s_opts" | wc -w)" -ge 10 ] ||
	not_ok "dlock's getopt table is found in cli/dlock.c (found: $l_opts $s_opts)"
# shellcheck disable=SC2086
if has "$tmp/dlock.help" $l_opts $s_opts; then
	ok "every option of dlock's getopt table is in dlock --help"
else
	not_ok "every option of dlock's getopt table is in dlock --help"
fi
# ...and every option and variable of its --help is in the man page and
# the reference
c_opts=$(grep -E '^ +-' "$tmp/dlock.help" | sed 's/^ *//; s/  .*//' |
	grep -oE -- '--?[a-zA-Z][a-z-]*' | sort -u)
c_envs=$(grep -oE 'DLOCKD?_[A-Z_]+' "$tmp/dlock.help" | sort -u)
# shellcheck disable=SC2086
if has "$tmp/dlock.1.txt" $c_opts $c_envs && has "$tmp/dlock.md" $c_opts $c_envs; then
	ok "every option and variable of dlock --help is in dlock.1 and dlock.md"
else
	not_ok "every option and variable of dlock --help is in dlock.1 and dlock.md"
fi

[ "$fails" -eq 0 ]
