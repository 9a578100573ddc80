#!/bin/sh
# check-doc-links.sh -- every relative link of the project's Markdown
# (README.md, docs/** at any depth, bench/, tests/, examples/, deploy/,
# clients/: every *.md of the tree but build folders and node_modules) points
# to a file or folder that exists, and a #fragment to a heading of that
# file (GitHub's anchors: lowercased, punctuation but - and _ dropped,
# spaces as -). Web links are not fetched. Prints each broken link as
# file:line and exits 1 if there is one; `make lint` runs it.
#   sh tests/check-doc-links.sh [ROOT]
#   sh tests/check-doc-links.sh --self-test   plant a broken file link and
#                                             a broken anchor; both found
set -u

# anchors FILE: the anchor of each heading of a Markdown file, one a line
anchors() {
	awk '
		/^```/ { fence = !fence; next }
		fence || !/^#+ / { next }
		{
			h = $0
			sub(/^#+ +/, "", h)
			h = tolower(h)
			gsub(/[^a-z0-9 _-]/, "", h)
			gsub(/ /, "-", h)
			n[h]++
			print (n[h] > 1 ? h "-" (n[h] - 1) : h)
		}' "$1"
}

tmp_out=$(mktemp)
trap 'rm -f "$tmp_out"' EXIT

check() {	# check ROOT: print the broken links, fail if there is one
	root=$1
	files=$(cd "$root" && find . -name node_modules -prune -o -name '*.md' -print |
		sed 's|^\./||' | grep -Ev '^(build|build-asan|build-fuzz)/' | sort)
	for f in $files; do
		dir=$(dirname "$f")
		# each link target on its own line: file:line:target
		links=$(awk -v f="$f" '
			/^```/ { fence = !fence; next }
			fence { next }
			{
				s = $0
				while (match(s, /\]\([^)[:space:]]+\)/)) {
					print f ":" FNR ":" substr(s, RSTART + 2, RLENGTH - 3)
					s = substr(s, RSTART + RLENGTH)
				}
			}' "$root/$f")
		[ -n "$links" ] || continue
		printf '%s\n' "$links" | while IFS= read -r l; do
			target=${l#*:*:}
			where=${l%:"$target"}
			case $target in
			http://*|https://*|mailto:*) continue ;;
			'#'*) path=$f; frag=${target#\#} ;;
			*'#'*) path=$dir/${target%%#*}; frag=${target#*#} ;;
			*) path=$dir/$target; frag= ;;
			esac
			if [ ! -e "$root/$path" ]; then
				echo "doc-links: $where: no such file: $target"
				continue
			fi
			if [ -n "$frag" ] && [ -f "$root/$path" ] &&
			   ! anchors "$root/$path" | grep -qxF "$frag"; then
				echo "doc-links: $where: no heading for #$frag in $path"
			fi
		done
	done >"$tmp_out"
	cat "$tmp_out"
	[ ! -s "$tmp_out" ]
}

if [ "${1:-}" = --self-test ]; then
	here=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp" "$tmp_out"' EXIT
	mkdir -p "$tmp/docs"
	printf '# Top\n\n## A heading, here\n\nSee [x](docs/b.md#two-words) and [y](#a-heading-here).\n' >"$tmp/README.md"
	printf '# Two words\n' >"$tmp/docs/b.md"
	fails=0
	check "$tmp" >/dev/null && echo "ok - good links pass" ||
		{ echo "not ok - good links fail"; fails=1; }
	printf 'And [z](docs/missing.md).\n' >>"$tmp/README.md"
	check "$tmp" | grep -q 'README.md:6: no such file' && echo "ok - a missing file is found" ||
		{ echo "not ok - a missing file is not found"; fails=1; }
	printf 'And [w](docs/b.md#three-words).\n' >>"$tmp/README.md"
	check "$tmp" | grep -q 'README.md:7: no heading for #three-words' &&
		echo "ok - a missing anchor is found" ||
		{ echo "not ok - a missing anchor is not found"; fails=1; }
	# a page deeper in docs/: links up and across, to a file and an anchor
	mkdir -p "$tmp/docs/guides"
	printf '# A guide\n\n[b](../b.md#two-words), [top](../../README.md#a-heading-here).\n' >"$tmp/docs/guides/c.md"
	sed -i '$d' "$tmp/README.md"; sed -i '$d' "$tmp/README.md"
	check "$tmp" >/dev/null && echo "ok - links up from docs/guides/ resolve" ||
		{ echo "not ok - links up from docs/guides/ fail"; fails=1; }
	printf 'And [v](../concepts/none.md#x) and [u](../b.md#nothing).\n' >>"$tmp/docs/guides/c.md"
	check "$tmp" >"$tmp/nested.out"
	grep -q 'docs/guides/c.md:4: no such file: ../concepts/none.md#x' "$tmp/nested.out" &&
	grep -q 'docs/guides/c.md:4: no heading for #nothing in docs/guides/../b.md' "$tmp/nested.out" &&
		echo "ok - a broken link and anchor in docs/guides/ are found" ||
		{ cat "$tmp/nested.out"; echo "not ok - a broken link or anchor in docs/guides/ is not found"; fails=1; }
	check "$here" >/dev/null && echo "ok - the tree's links all resolve" ||
		{ echo "not ok - the tree has broken links"; fails=1; }
	exit $fails
fi

check "${1:-.}" && echo "doc-links: ok"
