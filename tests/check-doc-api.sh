#!/bin/sh
# check-doc-api.sh -- docs/reference/http-api.md and openapi.yaml name the
# same routes: every method and path of openapi.yaml's `paths` is a row of
# the page's "Every route" table (| `METHOD` | `PATH` | ... |), and every
# row there is in openapi.yaml. Prints each route one side lacks; exits 1
# if there is one. `make lint` and `sh tests/run.sh BUILD unit` run it.
#   sh tests/check-doc-api.sh [ROOT]
#   sh tests/check-doc-api.sh --self-test
set -u

routes_of_openapi() {
	awk '/^paths:/ { p = 1; next }
		p && /^[^ #]/ { p = 0 }
		p && /^  [^ ]/ { path = $1; sub(/:$/, "", path); gsub(/["'\'']/, "", path) }
		p && /^    (get|put|post|delete|head|patch|options):/ {
			m = $1; sub(/:$/, "", m); print toupper(m), path }' "$1" | sort -u
}

routes_of_page() {
	awk '/^## / { p = ($0 == "## Every route"); next }
		p && /^\| `[A-Z]+` \| `\// {
			split($0, c, "|"); m = c[2]; r = c[3]
			gsub(/[ `]/, "", m); gsub(/[ `]/, "", r); print m, r }' "$1" | sort -u
}

check() {	# check ROOT
	api=$1/openapi.yaml page=$1/docs/reference/http-api.md
	routes_of_openapi "$api" >"$tmp/api"
	routes_of_page "$page" >"$tmp/page"
	[ -s "$tmp/api" ] || { echo "not ok - no routes found in $api"; return 1; }
	[ -s "$tmp/page" ] || { echo "not ok - no \"## Every route\" table in $page"; return 1; }
	comm -23 "$tmp/api" "$tmp/page" | sed 's/^/doc-api: missing from docs\/reference\/http-api.md: /'
	comm -13 "$tmp/api" "$tmp/page" | sed 's/^/doc-api: not in openapi.yaml: /'
	cmp -s "$tmp/api" "$tmp/page"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "${1:-}" = --self-test ]; then
	here=$(cd "$(dirname "$0")/.." && pwd)
	t=$tmp/tree
	mkdir -p "$t/docs/reference"
	printf 'openapi: 3.1.0\npaths:\n  /a/{name}:\n    get:\n      x: 1\n    put:\n      x: 1\ncomponents:\n  x: 1\n' >"$t/openapi.yaml"
	printf '# API\n\n## Every route\n\n| method | path |\n|---|---|\n| `GET` | `/a/{name}` | x |\n| `PUT` | `/a/{name}` | y |\n' >"$t/docs/reference/http-api.md"
	fails=0
	check "$t" >/dev/null && echo "ok - the same routes pass" ||
		{ echo "not ok - the same routes fail"; fails=1; }
	printf '| `DELETE` | `/a/{name}` | z |\n' >>"$t/docs/reference/http-api.md"
	check "$t" | grep -q 'not in openapi.yaml: DELETE /a/{name}' &&
		echo "ok - a route only the page has is found" ||
		{ echo "not ok - a route only the page has is not found"; fails=1; }
	printf '    post:\n      x: 1\n' >"$tmp/post"
	sed -i '/^    put:/{N;r '"$tmp/post"'
}' "$t/openapi.yaml"
	check "$t" | grep -q 'missing from docs/reference/http-api.md: POST /a/{name}' &&
		echo "ok - a route only openapi.yaml has is found" ||
		{ echo "not ok - a route only openapi.yaml has is not found"; fails=1; }
	check "$here" >"$tmp/out" && echo "ok - docs/reference/http-api.md names every route of openapi.yaml, and no other" ||
		{ cat "$tmp/out"; echo "not ok - docs/reference/http-api.md and openapi.yaml disagree"; fails=1; }
	exit $fails
fi

check "${1:-.}" && echo "doc-api: ok"
