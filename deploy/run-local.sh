#!/bin/sh
# run-local.sh -- what `make run` does: serve dlockd in the foreground.
# Without DLOCKD_REDIS_URL it starts a private redis-server on a unix socket
# under build/run/ (no port to collide with) and stops it on exit.
set -eu
bin=${1:-build/dlockd}

if [ -n "${DLOCKD_REDIS_URL:-}" ]; then
	exec "$bin"
fi

dir=$(cd "$(dirname "$bin")" && pwd)/run
mkdir -p "$dir"
sock="$dir/redis.sock"
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 \
	--dir "$dir" --save "" --appendonly no \
	--pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --daemonize yes
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null || true' EXIT INT TERM
i=0
until redis-cli -s "$sock" ping >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { echo "redis-server did not start; see $dir/redis.log" >&2; exit 1; }
	sleep 0.05
done
echo "private redis-server on unix://$sock (pid $(cat "$dir/redis.pid"))" >&2
DLOCKD_REDIS_URL="unix://$sock" "$bin" "$@" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; kill "$(cat "$dir/redis.pid")" 2>/dev/null || true' EXIT INT TERM
wait $pid
