#!/bin/sh
# leader.sh -- leader election over a dlockd lock, with the leader's address
# as the holder value: the leader holds the lock and renews it; every other
# copy watches the lock and learns the leader's address from the watch's
# answer, and takes over when the leader lets go or dies (its lease ends).
# Usage: leader.sh MY_ADDRESS. Needs curl. DLOCKD_URL picks the server,
# DLOCKD_LOCK the lock (default: leader). Ctrl-C or SIGTERM gives up the
# leadership at once.
set -u
me=${1:?usage: leader.sh MY_ADDRESS}
url=${DLOCKD_URL:-http://127.0.0.1:8080}
lock=$url/locks/${DLOCKD_LOCK:-leader}
owner=node-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
ttl=6000

trap 'curl -s -X DELETE "$lock?owner=$owner" >/dev/null; exit 130' INT TERM

index=0 following=
while :; do
	out=$(curl -s --max-time 10 -X PUT "$lock?owner=$owner&ttl_ms=$ttl&value=$me")
	case $out in
	*'"fencing_token"'*)
		echo "leader: $me"
		following=
		# renew a third of the lease at a time; a refused renewal
		# (the lease ran out) ends the leadership
		while sleep 2; do
			curl -sf --max-time 2 -X POST "$lock/heartbeat?owner=$owner&ttl_ms=$ttl" \
				>/dev/null || break
		done
		echo "no longer leader"
		continue ;;
	esac
	# not the leader: wait for the lock to change, then try again
	st=$(curl -s --max-time 40 "$lock?index=$index&wait_ms=30000")
	index=$(printf '%s' "$st" | sed -n 's/.*"index":\([0-9]*\).*/\1/p')
	leader=$(printf '%s' "$st" | sed -n 's/.*"value":"\([^"]*\)".*/\1/p')
	if [ -z "$index" ]; then
		echo "leader.sh: dlockd at $url answered: $st" >&2
		index=0
		sleep 1
	elif [ -n "$leader" ] && [ "$leader" != "$following" ]; then
		echo "following $leader"
		following=$leader
	fi
done
