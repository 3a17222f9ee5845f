#!/bin/sh
# foreign.sh BUILD - the wheel on a machine with nothing but Python: a
# minimal Debian 12 (debootstrap --variant=minbase with python3 and
# python3-venv, none of gRPC, LMDB, protobuf-c, OpenSSL's libssl3 beyond
# what python3 pulls, jansson or libmicrohttpd) in a chroot, the wheel
# (tools/wheel.sh) pip-installed into a venv there (numpy from PyPI), a
# local cluster from the installed zshard-local, two ranks of SGD
# (foreign_check.py, numpy only) whose parameters equal numpy's. As root
# (debootstrap, chroot); the host's CA bundle and pip.conf go in so that
# pip reaches PyPI as the host does. Exits 77 (skipped, saying why) when
# it cannot run here. make check-foreign runs it; about 2 minutes.
set -eu
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "foreign: skipped: needs root (debootstrap, chroot)"; exit 77; }
if ! command -v debootstrap >/dev/null 2>&1; then
	apt-get update -q >/dev/null &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
			debootstrap >/dev/null ||
		{ echo "foreign: skipped: debootstrap cannot be installed"; exit 77; }
fi
whl=$(sh "$root/tools/wheel.sh" "$build" | tail -1)
[ -f "$whl" ] || { echo "foreign: no wheel built" >&2; exit 1; }
d=$(mktemp -d /tmp/zshard-foreign-XXXXXX)
clean() {
	[ -x "$d/sys/root/venv/bin/zshard-local" ] &&
		chroot "$d/sys" /root/venv/bin/zshard-local stop >/dev/null 2>&1
	mountpoint -q "$d/sys/proc" && umount "$d/sys/proc"
	rm -rf "$d"
}
trap clean EXIT
trap 'exit 1' INT TERM
mirror=http://deb.debian.org/debian
echo "foreign: a minimal Debian 12 with python3 in $d/sys ($mirror)"
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$d/sys" "$mirror" \
	>"$d/debootstrap.log" 2>&1 || { tail -20 "$d/debootstrap.log"; exit 1; }
cp /etc/resolv.conf "$d/sys/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$d/sys/etc/ssl/certs/ca-certificates.crt"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$d/sys/etc/pip.conf"
mkdir -p "$d/sys/root/w"
cp "$whl" "$root/tests/python/foreign_check.py" "$d/sys/root/w/"
mount -t proc proc "$d/sys/proc"
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$d/sys" /bin/sh -euc '
cd /root/w
for l in libgrpc.so libgpr.so liblmdb.so libprotobuf-c.so libjansson.so libmicrohttpd.so; do
	if ldconfig -p | grep -q "$l"; then echo "foreign: $l is on the system: not a bare one"; exit 1; fi
done
python3 -m venv /root/venv
/root/venv/bin/pip install -q --disable-pip-version-check --retries 10 --timeout 60 ./zshard-*.whl
PATH=/root/venv/bin:$PATH
zshard-local start --servers 2 >/dev/null
python3 foreign_check.py
zshard-local stop >/dev/null
'
echo "foreign: passed"
