#!/bin/sh
# check-image.sh -- without a Docker engine, check what the Dockerfile's
# runtime stage relies on: every shared library build/dlockd and
# build/dlock link to directly must come from a package the runtime stage
# installs (or from libc6, which debian:bookworm-slim has); and the
# default of the Dockerfile's VERSION (the image's version label and what
# its dlockd --version prints) must be the VERSION file's, as
# openapi.yaml's info.version must.
#   sh deploy/check-image.sh [build/dlockd build/dlock]
set -eu
[ $# -gt 0 ] || set -- build/dlockd build/dlock
# the packages the last stage's apt-get install line names
runtime=$(sed -n '/^FROM debian:bookworm-slim$/h; /^FROM debian:bookworm-slim$/,$!d; H; ${x;p}' Dockerfile |
	grep -o 'no-install-recommends [^\\&]*' | tail -n 1 | sed 's/no-install-recommends //; s/ *$//')
missing=
for lib in $(for bin in "$@"; do objdump -p "$bin"; done | awk '/NEEDED/{print $2}' | sort -u); do
	path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
	# merged /usr: dpkg may know the file under either path
	pkg=$( { dpkg -S "$path" || dpkg -S "$(readlink -f "$path")"; } 2>/dev/null |
		head -n 1 | cut -d: -f1)
	case " $runtime libc6 " in
	*" $pkg "*) ;;
	*) missing="$missing $lib($pkg)" ;;
	esac
done
version=$(cat VERSION)
api=$(sed -n 's/^  version: *//p' openapi.yaml | head -n 1)
arg=$(sed -n 's/^ARG VERSION=//p' Dockerfile | head -n 1)
if [ "$arg" != "$version" ] || [ "$api" != "$version" ]; then
	echo "Dockerfile's ARG VERSION=$arg and openapi.yaml's info.version $api must be" \
		"VERSION's $version" >&2
	exit 1
fi
if [ -n "$missing" ]; then
	echo "Dockerfile runtime stage lacks:$missing" >&2
	exit 1
fi
echo "Dockerfile runtime stage provides every library $* need ($runtime); version $version"
