#!/bin/sh
# check-version.sh BUILD - zshard has one version, the file VERSION: the
# daemons' and zshardctl's --version, libzshard's file name and soname, the
# Python package's __version__ (from a source tree) and every wheel or
# library file name the docs show all say it (the daemons once said 0.1.0
# where libzshard and the wheel said 0.9.0).
#
#   tests/lib/check-version.sh build
set -u
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
v=$(cat "$root/VERSION")
bad=0
no() { echo "version: $*"; bad=1; }
case $v in
[0-9]*.[0-9]*.[0-9]*) ;;
*) no "VERSION holds '$v', not MAJOR.MINOR.PATCH" ;;
esac
for p in zshard-coordinator zshard-server zshardctl; do
	got=$("$build/bin/$p" --version 2>&1)
	[ "$got" = "$p $v" ] || no "$p --version says '$got', VERSION '$v'"
done
[ -f "$build/lib/libzshard.so.$v" ] || no "no $build/lib/libzshard.so.$v"
so=$(objdump -p "$build/lib/libzshard.so.$v" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
[ "$so" = "libzshard.so.${v%%.*}" ] || no "libzshard's soname is '$so', want libzshard.so.${v%%.*}"
py=$(PYTHONPATH="$root/python" /usr/bin/python3 -c 'import zshard; print(zshard.__version__)' 2>&1)
[ "$py" = "$v" ] || no "the Python package says '$py', VERSION '$v'"
grep -q '^version *=' "$root/python/pyproject.toml" && no "python/pyproject.toml writes a version of its own (it is dynamic: setup.py reads VERSION)"
# what the docs show: zshard-X.Y.Z-*.whl, libzshard.so.X.Y.Z
for f in "$root/README.md" "$root"/docs/*.md; do
	[ -f "$f" ] || continue
	grep -oE 'zshard-[0-9]+\.[0-9]+\.[0-9]+-|libzshard\.so\.[0-9]+\.[0-9]+\.[0-9]+' "$f" | sort -u |
		while read -r w; do
			case $w in
			*"$v"*) ;;
			*) echo "version: $(basename "$f") shows $w, VERSION is $v"; exit 1 ;;
			esac
		done || bad=1
done
# the image's tag in the Kubernetes manifest and the Containerfile's
# example build
for f in "$root/deploy/kubernetes/zshard.yaml" "$root/deploy/kubernetes/Containerfile"; do
	for w in $(grep -oE 'zshard:[0-9]+\.[0-9]+\.[0-9]+' "$f" | sort -u); do
		[ "$w" = "zshard:$v" ] || no "$(basename "$f") names the image $w, VERSION is $v"
	done
done
[ $bad -eq 0 ] && echo "version: $v everywhere (daemons, zshardctl, libzshard, Python, docs, the image's tag)"
exit $bad
