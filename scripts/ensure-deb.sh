#!/bin/sh
# ensure-deb.sh PACKAGE...: installs Debian packages that tests run as real
# peers (nginx in front of a node, for one), when they are missing. It needs
# root or password-less sudo; it says so and fails otherwise, and the test
# then skips with a loud message.
set -eu
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	as_root=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
	as_root="sudo -n"
else
	echo "ensure-deb: need root or password-less sudo to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
$as_root apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 $missing || {
	$as_root apt-get -o DPkg::Lock::Timeout=600 update
	$as_root apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 $missing
}
