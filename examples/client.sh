#!/bin/sh
# client.sh -- take a dlockd lock (waiting up to 10 s), renew it while
# working, release it: also when the work fails or the script gets Ctrl-C
# or SIGTERM. Needs curl. DLOCKD_URL picks the server, DLOCKD_LOCK the lock.
set -u
url=${DLOCKD_URL:-http://127.0.0.1:8080}
lock=$url/locks/${DLOCKD_LOCK:-nightly-report}
# Unique per run: the holder's PUT is granted again (a repeat), so two runs sharing an
# owner would both "hold" the lock at once.
owner=report-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

# req METHOD URL [JSON]: the answer's body on stdout; on an error answer or
# when dlockd cannot be reached, one line on stderr and status 1.
req() {
	out=$(curl -s --max-time 30 --fail-with-body -X "$1" "$2" ${3:+-d "$3"})
	case $? in
	0) printf '%s\n' "$out" ;;
	22) echo "client.sh: $1 ${2#"$url"}: $out" >&2; return 1 ;;
	*) echo "client.sh: cannot reach dlockd at $url" >&2; return 1 ;;
	esac
}

maybe_held=
release() {
	[ -n "$maybe_held" ] || return 0
	maybe_held=
	# quiet when it fails: not held (never acquired, or the lease ran
	# out) or dlockd gone, and nothing more to do either way
	req DELETE "$lock?owner=$owner" >/dev/null 2>&1 && echo released
}
trap release EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# From here on the lock may be ours (an interrupted PUT may have been
# granted), so every way out releases it.
maybe_held=1
grant=$(req PUT "$lock" "{\"owner\":\"$owner\",\"ttl_ms\":15000,\"wait_ms\":10000}") || exit 1
echo "acquired, fencing token $(printf '%s' "$grant" | sed 's/.*"fencing_token":\([0-9]*\).*/\1/')"
for step in 1 2 3; do
	echo "working, step $step"
	sleep 1
	# renew; a 409 not_held here means the lease was lost: stop working
	req POST "$lock/heartbeat" "{\"owner\":\"$owner\",\"ttl_ms\":15000}" >/dev/null || exit 1
done
echo "done, releasing"
