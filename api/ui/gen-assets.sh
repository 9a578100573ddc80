#!/bin/sh
# gen-assets.sh -- the status page's files (api/ui/: index.html, *.js,
# *.css) as a C table, so that dlockd serves exactly the page it was built
# with (the Makefile runs it into $(BUILD)/ui_assets.c; api/ui_assets.h
# declares the table). index.html is served at /ui, every other file at
# /ui/<file>; each entry has its Content-Type and a strong ETag (the start
# of the file's SHA-256).
#   sh api/ui/gen-assets.sh api/ui/index.html api/ui/app.js ... >ui_assets.c
set -eu

die() {
	echo "gen-assets.sh: $*" >&2
	exit 1
}

[ $# -gt 0 ] || die "usage: gen-assets.sh FILE..."

echo '/* generated from api/ui/ by api/ui/gen-assets.sh; do not edit */'
echo '#include "api/ui_assets.h"'
echo
i=0
for f in "$@"; do
	[ -f "$f" ] || die "no such file: $f"
	echo "static const char asset_$i[] ="
	# one string literal a line: \ " and ? escaped (no trigraphs)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/\t"/' -e 's/$/\\n"/' "$f"
	echo ';'
	i=$((i + 1))
done
echo
echo 'const struct ui_asset ui_assets[] = {'
i=0
for f in "$@"; do
	base=${f##*/}
	case $base in
	index.html) path=/ui ;;
	*) path=/ui/$base ;;
	esac
	case $base in
	*.html) type='text/html; charset=utf-8' ;;
	*.js) type='text/javascript; charset=utf-8' ;;
	*.css) type='text/css; charset=utf-8' ;;
	*.svg) type='image/svg+xml' ;;
	*) die "$f: no Content-Type known for this file name" ;;
	esac
	# the file as embedded ends with a newline even if it had none
	tag=$(sed -e '$a\' "$f" | sha256sum | cut -c1-20)
	printf '\t{ "%s", "%s", asset_%d, sizeof(asset_%d) - 1, "\\"%s\\"" },\n' \
		"$path" "$type" "$i" "$i" "$tag"
	i=$((i + 1))
done
echo '};'
echo 'const size_t ui_assets_count = sizeof(ui_assets) / sizeof(ui_assets[0]);'
