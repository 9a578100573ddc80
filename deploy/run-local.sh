#!/bin/sh
# run-local.sh -- what `make run` does: serve dlockd in the foreground until
# Ctrl-C or SIGTERM.
#   sh deploy/run-local.sh BUILD/dlockd [dlockd flags...]
# Settings come from DLOCKD_* variables (DLOCKD_LISTEN=127.0.0.1:9090) or
# flags. With DLOCKD_REDIS_URL set, dlockd uses that Redis. Without it, this
# starts a private redis-server on a unix socket under BUILD/run/ (no port
# to collide with, nothing saved) and stops it again however this ends:
# Ctrl-C, SIGTERM, or dlockd failing to start or dying. The exit status is
# dlockd's (130/143 when stopped by SIGINT/SIGTERM). dlockd's pid is in
# BUILD/run/dlockd.pid while it runs (kill -HUP it to re-read --auth-file).
set -u
bin=${1:?usage: run-local.sh path/to/dlockd [dlockd flags...]}
shift
dir=$(cd "$(dirname "$bin")" && pwd)/run
mkdir -p "$dir"

if [ -n "${DLOCKD_REDIS_URL:-}" ]; then
	echo $$ >"$dir/dlockd.pid"
	exec "$bin" "$@"
fi

sock=$dir/redis.sock
redis_pid=
dlockd_pid=

# Stop dlockd, then the private redis-server, and wait until both are
# gone. Runs once, from whichever trap comes first.
stop() {
	trap '' INT TERM
	if [ -n "$dlockd_pid" ]; then
		kill -TERM "$dlockd_pid" 2>/dev/null
		wait "$dlockd_pid" 2>/dev/null
		dlockd_pid=
		rm -f "$dir/dlockd.pid"
	fi
	if [ -n "$redis_pid" ]; then
		kill -TERM "$redis_pid" 2>/dev/null
		i=0
		while kill -0 "$redis_pid" 2>/dev/null && [ $i -lt 200 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		kill -0 "$redis_pid" 2>/dev/null && kill -KILL "$redis_pid" 2>/dev/null
		redis_pid=
	fi
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

command -v redis-server >/dev/null ||
	{ echo "run-local.sh: redis-server is not installed (make run installs it)" >&2; exit 1; }
rm -f "$sock" "$dir/redis.pid"
# Daemonized, so it is in a session of its own and a Ctrl-C reaches only
# dlockd and this script; this script stops it after dlockd.
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 \
	--dir "$dir" --save "" --appendonly no \
	--pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --daemonize yes ||
	{ echo "run-local.sh: redis-server did not start; see $dir/redis.log" >&2; exit 1; }
i=0
until [ -s "$dir/redis.pid" ] && redis-cli -s "$sock" ping >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -ge 200 ]; then
		[ -s "$dir/redis.pid" ] && redis_pid=$(cat "$dir/redis.pid")
		echo "run-local.sh: redis-server did not answer; see $dir/redis.log" >&2
		exit 1
	fi
	sleep 0.05
done
redis_pid=$(cat "$dir/redis.pid")
echo "private redis-server on unix://$sock (pid $redis_pid; redis-cli -s $sock)" >&2

DLOCKD_REDIS_URL="unix://$sock" "$bin" "$@" &
dlockd_pid=$!
echo $dlockd_pid >"$dir/dlockd.pid"
# wait returns early (status > 128) when a trapped signal arrives; the
# trap then stops both.
wait "$dlockd_pid"
rc=$?
dlockd_pid=
rm -f "$dir/dlockd.pid"
exit $rc
