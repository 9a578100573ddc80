#!/bin/sh
# run.sh -- what `make test` runs: every unit test binary, then the
# integration suite (which starts its own redis-server and dlockd on free
# loopback ports), then the check of every response it got against
# openapi.yaml, then the status page in headless Chromium (tests/ui/),
# then the client libraries' own suites (clients/python, clients/go,
# clients/node: `make test-python`, `make test-go`, `make test-node` run
# one alone). Prints one closing line "N passed, M failed" (and ", K
# skipped" when a test said it could not run here) and exits non-zero when
# anything failed.
#   sh tests/run.sh BUILD_DIR [unit|integration|ui|python|go|node]
set -u
build=${1:-build}
only=${2:-all}
passed=0
failed=0
skipped=0
failed_names=

count() {	# count <name> <output file> <exit status>
	p=$(grep -c '^ok ' "$2" 2>/dev/null || true)
	s=$(grep -c '^ok .* # SKIP ' "$2" 2>/dev/null || true)
	p=$((p - s))
	skipped=$((skipped + s))
	f=$(grep -c '^not ok ' "$2" 2>/dev/null || true)
	if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1	# crashed or failed to start: count it, never pass silently
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -eq 0 ] || failed_names="$failed_names $1"
}

# check_contract <name> <log>: the responses in log (one JSON line each), against
# openapi.yaml; counted as <name>; the log is removed.
check_contract() {
	node tests/contract/validate.mjs openapi.yaml "$2" >"$out" 2>&1
	rc=$?
	cat "$out"
	count "$1" "$out" "$rc"
	rm -f "$2"
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

if [ "$only" = all ] || [ "$only" = unit ]; then
	echo "== layers"
	sh tests/check-layers.sh --self-test >"$out" 2>&1
	rc=$?
	cat "$out"
	count layers "$out" "$rc"
	# the docs: links and anchors resolve, every command shown is run by
	# a test (test_docs.c runs the doc-check blocks against a dlockd), the
	# HTTP reference names openapi.yaml's routes
	for c in doc-links doc-commands doc-api; do
		echo "== $c"
		sh "tests/check-$c.sh" --self-test >"$out" 2>&1
		rc=$?
		cat "$out"
		count "$c" "$out" "$rc"
	done
	for t in "$build"/tests/test_*; do
		[ -x "$t" ] || continue
		echo "== $(basename "$t")"
		CMOCKA_MESSAGE_OUTPUT=TAP "$t" >"$out" 2>&1
		rc=$?
		cat "$out"
		count "$(basename "$t")" "$out" "$rc"
	done
fi

if [ "$only" = all ] || [ "$only" = integration ]; then
	echo "== integration"
	contract=$(mktemp)
	DLOCKD_CONTRACT_LOG="$contract" \
	DLOCKD_BIN="$build/dlockd" "$build/tests/dlockd_integration" >"$out" 2>&1 &
	pid=$!
	tail -f --pid=$pid "$out" 2>/dev/null &
	wait $pid
	rc=$?
	sleep 0.2
	count integration "$out" "$rc"

	# every response the suite got, against openapi.yaml
	echo "== contract"
	check_contract contract "$contract"
fi

if [ "$only" = all ] || [ "$only" = ui ]; then
	# the status page (/ui) in Debian's chromium, its own redis and dlockd
	echo "== ui"
	node tests/ui/ui.test.mjs "$build" >"$out" 2>&1
	rc=$?
	cat "$out"
	count ui "$out" "$rc"
fi

# the Python client (clients/python): unittest's "... ok" lines counted as
# TAP's (make test-python runs the same); then the answers its tests got,
# against openapi.yaml.
if [ "$only" = all ] || [ "$only" = python ]; then
	echo "== python"
	contract=$(mktemp)
	DLOCKD_BIN="$build/dlockd" DLOCKD_CONTRACT_LOG="$contract" PYTHONPATH=clients/python \
		python3 -m unittest discover -v -s clients/python/tests -t clients/python >"$out" 2>&1
	rc=$?
	cat "$out"
	sed -n -e 's/^\(test.*\) \.\.\. ok$/ok \1/p' -e "s/^\(test.*\) \.\.\. skipped '\(.*\)'$/ok \1 # SKIP \2/p" \
		-e 's/^\(test.*\) \.\.\. \(FAIL\|ERROR\)$/not ok \1/p' "$out" >"$out.tap"
	count python "$out.tap" "$rc"
	rm -f "$out.tap"
	echo "== python contract"	# the answers the Python client got, against openapi.yaml
	check_contract python-contract "$contract"
fi

# The Go client: go test, stdlib only, its build cache under BUILD_DIR and
# no network (GOPROXY=off); each top-level test's verdict, as TAP, counts;
# then the answers its tests got, against openapi.yaml.
if [ "$only" = all ] || [ "$only" = go ]; then
	echo "== go"
	root=$(pwd)
	contract=$(mktemp)
	(cd clients/go && DLOCKD_BIN="$root/$build/dlockd" GOCACHE="$root/$build/go/cache" \
		GOPATH="$root/$build/go/path" GOPROXY=off GOFLAGS= DLOCKD_CONTRACT_LOG="$contract" \
		go test -count=1 -timeout 150s -v .) >"$out" 2>&1
	rc=$?
	cat "$out"
	sed -n -e 's/^--- PASS: \([^ ]*\).*/ok \1/p' -e 's/^--- FAIL: \([^ ]*\).*/not ok \1/p' \
		-e 's/^--- SKIP: \([^ ]*\).*/ok \1 # SKIP /p' "$out" >"$out.tap"
	count go "$out.tap" "$rc"
	rm -f "$out.tap"
	echo "== go contract"	# the answers the Go client got, against openapi.yaml
	check_contract go-contract "$contract"
fi

# The Node client: node --test, built-ins only; its TAP counts; then the
# answers its tests got, against openapi.yaml.
if [ "$only" = all ] || [ "$only" = node ]; then
	echo "== node"
	root=$(pwd)
	contract=$(mktemp)
	(cd clients/node && DLOCKD_BIN="$root/$build/dlockd" DLOCKD_CONTRACT_LOG="$contract" \
		node --test --test-reporter=tap test/*.test.js) >"$out" 2>&1
	rc=$?
	cat "$out"
	count node "$out" "$rc"
	echo "== node contract"	# the answers the Node client got, against openapi.yaml
	check_contract node-contract "$contract"
fi

[ -z "$failed_names" ] || echo "failing:$failed_names"
if [ "$skipped" -eq 0 ]; then
	echo "$passed passed, $failed failed"
else
	echo "$passed passed, $failed failed, $skipped skipped"
fi
[ "$failed" -eq 0 ]
