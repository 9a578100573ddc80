#!/bin/sh
# check-doc-commands.sh -- every command the docs show is run by a test,
# so that no page can rot. In README.md and docs/**/*.md (but the
# generated references), every fence names its language, and every ```sh,
# ```console or ```python block has, on the line before it, one of:
#   <!-- run: doc-check -->          this script runs it (--run, below);
#                                    a ```sh block with sh, a ```python
#                                    one with python3 and clients/python
#                                    on PYTHONPATH
#   <!-- run-by: FILE TEST ... -->   the integration test TEST of
#                                    tests/integration/FILE runs it: the
#                                    check fails if FILE has no TEST(TEST)
#   <!-- not-run: WHY -->            it cannot run here, and why
# A block with none of them, or a bare ``` fence, fails the check. Output
# goes in ```text (or ```console) blocks, so the runnable ones are
# unambiguous. `make lint` and test_docs.c run it.
#   sh tests/check-doc-commands.sh [ROOT]
#   sh tests/check-doc-commands.sh --run URL BUILD_DIR [ROOT]
#       also run each doc-check block, in a scratch folder of its own, with
#       http://127.0.0.1:8080 replaced by URL (and DLOCKD_URL=URL), build/
#       by BUILD_DIR: it must exit 0; a ```text block right after it is its
#       output: as many lines, each JSON line with the same keys in the
#       same order, each other line with the same first word
#   sh tests/check-doc-commands.sh --self-test
# Prints "ok - ..." / "not ok - ..." lines; exits 1 on a failure.
set -u

# blocks FILE: one line per fence that opens a block:
#   LINE<TAB>LANG<TAB>MARKER<TAB>OUTPUT_LINE
# MARKER is the HTML comment on the nearest non-blank line before it (or
# -); OUTPUT_LINE the line of a ```text fence right after the block (or 0)
blocks() {
	awk '
		function flush() {
			if (open_line) print open_line "\t" open_lang "\t" open_mark "\t" 0
			open_line = 0
		}
		{ s = $0; sub(/^[ \t]+/, "", s) }
		fence {
			if (s ~ /^```/) { fence = 0; closed = NR }
			next
		}
		s ~ /^```/ {
			lang = substr(s, 4); sub(/[ \t].*/, "", lang)
			if (open_line && pending && lang == "text") {
				print open_line "\t" open_lang "\t" open_mark "\t" NR
				open_line = 0
			} else
				flush()
			open_line = NR; open_lang = (lang == "" ? "-" : lang)
			open_mark = (prev ~ /^<!-- / ? prev : "-")
			fence = 1; pending = 0; prev = ""
			next
		}
		s != "" {
			if (open_line && closed) { flush() }
			prev = s
		}
		{ pending = (open_line && closed == NR - (s == "" ? 1 : 0)) || (pending && s == "") }
		END { flush() }' "$1"
}

# body FILE LINE: the lines of the block that opens at LINE
body() {
	awk -v at="$2" 'NR > at { s = $0; sub(/^[ \t]+/, "", s); if (s ~ /^```/) exit; print }' "$1"
}

# shape: each line of stdin as its shape: a JSON object's keys, in order;
# any other line's first word
shape() {
	while IFS= read -r l; do
		case $l in
		'{'*) printf '%s\n' "$l" | grep -o '"[A-Za-z_]*":' | tr -d '\n'; echo ;;
		*) printf '%s\n' "$l" | awk '{ print $1 }' ;;
		esac
	done
}

fails=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }

check() {	# check ROOT [URL BUILD_DIR]
	root=$1 url=${2:-} build=${3:-}
	files=$(cd "$root" && { ls README.md 2>/dev/null; find docs -name '*.md' 2>/dev/null; } | sort)
	n_run=0 n_by=0 n_not=0
	for f in $files; do
		# the generated references say so on their first line
		head -1 "$root/$f" | grep -q '^<!-- generated ' && continue
		blocks "$root/$f" >"$tmp/blocks"
		while IFS='	' read -r line lang mark out; do
			where="$f:$line"
			case $lang in
			-) not_ok "$where: a fence without a language (sh, console, text, ...)"; continue ;;
			sh|console|python) ;;
			*) continue ;;
			esac
			case $mark in
			'<!-- run: doc-check -->')
				if [ "$lang" = console ]; then
					not_ok "$where: run: doc-check on a console block (sh and python blocks run)"
					continue
				fi
				n_run=$((n_run + 1))
				[ -n "$url" ] && run_block "$root" "$f" "$line" "$out" "$lang" ;;
			'<!-- run-by: '*)
				set -- $mark
				tfile=$3 tname=$4
				case $tfile in */*) tpath=$root/$tfile ;; *) tpath=$root/tests/integration/$tfile ;; esac
				if [ ! -f "$tpath" ]; then
					not_ok "$where: run-by names $tfile, which does not exist"
				elif ! grep -q "^TEST($tname)" "$tpath"; then
					not_ok "$where: run-by names TEST($tname), which $tfile does not have"
				else
					n_by=$((n_by + 1))
				fi ;;
			'<!-- not-run: '?*' -->')
				n_not=$((n_not + 1)) ;;
			*)
				not_ok "$where: a $lang block without <!-- run: doc-check -->, <!-- run-by: FILE TEST --> or <!-- not-run: WHY --> before it" ;;
			esac
		done <"$tmp/blocks"
	done
	echo "# $n_run blocks run here, $n_by by a named test, $n_not not run (with why)"
}

run_block() {	# run_block ROOT FILE LINE OUTPUT_LINE LANG
	where="$2:$3"
	dir=$(mktemp -d "$tmp/run.XXXXXX")
	body "$1/$2" "$3" | sed -e "s|http://127\.0\.0\.1:8080|$url|g" \
		-e "s|^build/dlock|$build/dlock|" -e "s|\([ (\"'\`]\)build/dlock|\1$build/dlock|g" >"$dir/block.sh"
	case $5 in
	python) run="python3 ./block.sh" ;;
	*) run="sh -e ./block.sh" ;;
	esac
	pypath=$(cd "$1" && pwd)/clients/python
	(cd "$dir" && DLOCKD_URL=$url DLOCK_SERVER= PYTHONPATH=$pypath timeout 60 $run) >"$dir/out" 2>"$dir/err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		not_ok "$where: exits $rc: $(head -c 600 "$dir/err")"
		return
	fi
	if [ "$4" -ne 0 ]; then
		body "$1/$2" "$4" | shape >"$dir/want"
		shape <"$dir/out" >"$dir/got"
		if ! cmp -s "$dir/want" "$dir/got"; then
			not_ok "$where: the output is not shaped as the page shows:$(printf '\n'; cat "$dir/out"; echo '# want'; cat "$dir/want"; echo '# got'; cat "$dir/got")"
			return
		fi
	fi
	ok "$where runs as shown"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "${1:-}" = --self-test ]; then
	here=$(cd "$(dirname "$0")/.." && pwd)
	t=$tmp/tree
	mkdir -p "$t/docs" "$t/tests/integration"
	printf 'TEST(it_runs)\n{\n}\n' >"$t/tests/integration/test_x.c"
	printf '# A\n\n<!-- run-by: test_x.c it_runs -->\n```sh\ntrue\n```\n\n<!-- not-run: needs a cluster -->\n```console\n$ kubectl get pods\n```\n\n```text\nout\n```\n' >"$t/README.md"
	sh "$0" "$t" >/dev/null && ok "marked blocks pass" || not_ok "marked blocks fail"
	cp "$t/README.md" "$t/good.md"
	printf '\n```sh\necho unmarked\n```\n' >>"$t/README.md"
	sh "$0" "$t" | grep -q 'README.md:17: a sh block without' &&
		ok "an unmarked sh block is found" || not_ok "an unmarked sh block is not found"
	cp "$t/good.md" "$t/README.md"
	printf '\n<!-- run-by: test_x.c no_such_test -->\n```console\n$ x\n```\n' >"$t/docs/a.md"
	sh "$0" "$t" | grep -q 'docs/a.md:3: run-by names TEST(no_such_test)' &&
		ok "a run-by naming no test is found" || not_ok "a run-by naming no test is not found"
	printf '```\nbare\n```\n' >"$t/docs/a.md"
	sh "$0" "$t" | grep -q 'docs/a.md:1: a fence without a language' &&
		ok "a bare fence is found" || not_ok "a bare fence is not found"
	printf '<!-- run: doc-check -->\n```sh\necho "{\\"a\\":1,\\"b\\":2}"; echo hello world\n```\n\n```text\n{"a":7,"b":8}\nhello there\n```\n' >"$t/docs/a.md"
	sh "$0" --run http://127.0.0.1:1 . "$t" | grep -q '^ok - docs/a.md:2 runs as shown' &&
		ok "a doc-check block is run and its output shape compared" ||
		not_ok "a doc-check block is not run"
	printf '<!-- run: doc-check -->\n```sh\necho "{\\"a\\":1}"\n```\n\n```text\n{"b":1}\n```\n' >"$t/docs/a.md"
	sh "$0" --run http://127.0.0.1:1 . "$t" | grep -q '^not ok - docs/a.md:2: the output is not shaped' &&
		ok "an output of another shape is found" || not_ok "an output of another shape is not found"
	printf '<!-- run: doc-check -->\n```sh\nfalse\n```\n' >"$t/docs/a.md"
	sh "$0" --run http://127.0.0.1:1 . "$t" | grep -q '^not ok - docs/a.md:2: exits 1' &&
		ok "a doc-check block that fails is found" || not_ok "a failing doc-check block is not found"
	if sh "$0" "$here" >"$tmp/tree.out"; then
		ok "every block of the tree's docs is run or says why not ($(tail -1 "$tmp/tree.out" | sed 's/^# //'))"
	else
		cat "$tmp/tree.out"
		not_ok "the tree's docs have blocks nobody runs"
	fi
	exit $((fails > 0))
fi

if [ "${1:-}" = --run ]; then
	check "${4:-.}" "$2" "$(cd "$3" && pwd)"
else
	check "${1:-.}"
fi
exit $((fails > 0))
