#!/bin/sh
# client.sh -- take a dlockd lock (waiting up to 10 s), renew it while
# working, release it. Needs curl; DLOCKD_URL defaults to a local dlockd.
set -eu
url=${DLOCKD_URL:-http://127.0.0.1:8080}
lock=$url/locks/nightly-report
owner=report-$(hostname)-$$

curl -sf -X PUT "$lock" -d "{\"owner\":\"$owner\",\"ttl_ms\":15000,\"wait_ms\":10000}" ||
	{ echo "lock not acquired" >&2; exit 1; }
echo
for step in 1 2 3; do
	echo "working, step $step"
	sleep 1
	# renew; a 409 here means the lease was lost: stop working
	curl -sf -X POST "$lock/heartbeat" -d "{\"owner\":\"$owner\",\"ttl_ms\":15000}" >/dev/null ||
		{ echo "lease lost" >&2; exit 1; }
done
curl -sf -X DELETE "$lock?owner=$owner"
echo
