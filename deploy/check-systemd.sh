#!/bin/sh
# check-systemd.sh -- make lint's check of deploy/systemd/: the unit, alone
# and with the auth and TLS drop-ins, must pass `systemd-analyze verify` with no
# word of complaint (unknown keys are only warnings there, so any output
# fails), and stay in the "OK" band of `systemd-analyze security` (an
# exposure of at most 4.9). verify wants ExecStart's binary to exist, so
# the unit is checked as a copy whose ExecStart is the binary given.
# Works on files (--offline): systemd need not be running.
#   sh deploy/check-systemd.sh build/dlockd
set -eu
bin=$(cd "$(dirname "${1:?usage: check-systemd.sh path/to/dlockd}")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

check() {	# check DIR WHAT
	out=$(systemd-analyze verify "$1/dlockd.service" 2>&1) || fail=1
	if [ -n "$out" ]; then
		printf 'check-systemd: verify of %s complains:\n%s\n' "$2" "$out" >&2
		fail=1
	fi
	# --threshold is ten times the exposure: 49 is 4.9, the top of "OK"
	if ! out=$(systemd-analyze security --offline=true --threshold=49 \
		"$1/dlockd.service" 2>&1); then
		printf '%s\ncheck-systemd: %s is above "OK" in systemd-analyze security\n' \
			"$out" "$2" >&2
		fail=1
	fi
	echo "check-systemd: $2: $(printf '%s\n' "$out" | grep -o 'exposure level.*' || echo '?')"
}

for variant in plain auth tls; do
	mkdir -p "$tmp/$variant"
	sed "s|^ExecStart=/usr/local/bin/dlockd|ExecStart=$bin|" deploy/systemd/dlockd.service \
		>"$tmp/$variant/dlockd.service"
	grep -q "^ExecStart=$bin" "$tmp/$variant/dlockd.service" || {
		echo "check-systemd: deploy/systemd/dlockd.service has no ExecStart=/usr/local/bin/dlockd" >&2
		exit 1
	}
done
mkdir -p "$tmp/auth/dlockd.service.d"
cp deploy/systemd/auth.conf "$tmp/auth/dlockd.service.d/auth.conf"
check "$tmp/plain" "dlockd.service"
mkdir -p "$tmp/tls/dlockd.service.d"
cp deploy/systemd/tls.conf "$tmp/tls/dlockd.service.d/tls.conf"
check "$tmp/auth" "dlockd.service with auth.conf"
check "$tmp/tls" "dlockd.service with tls.conf"
exit $fail
