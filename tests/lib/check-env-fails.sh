#!/bin/sh
# check-env-fails.sh ZSHARDCTL - the environment check itself must be able
# to fail: on a copy of the tree with one fault planted at a time (a getenv
# of a ZSHARD_ name beside zs_env, a variable the C code or the Python
# package reads that is not listed, a fault point not listed, the doc's
# table changed), tests/lib/check-env.sh must exit non-zero and say what.
# Leaves nothing.
set -eu
ctl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "env-fails: $*"; exit 1; }

for d in base model math gpu storage net ctrl metrics rdma client engine server coord cli python deploy; do
	cp -r "$d" "$tmp/$d"
done
mkdir -p "$tmp/docs" && cp docs/operations.md "$tmp/docs/operations.md"
sh tests/lib/check-env.sh "$ctl" "$tmp/docs/operations.md" "$tmp" >"$tmp/out" 2>&1 ||
	fail "the clean copy fails: $(cat "$tmp/out")"

plant() { # file line what: the check must fail and say what
	cp "$tmp/$1" "$tmp/$1.orig"
	printf '%s\n' "$2" >>"$tmp/$1"
	if sh tests/lib/check-env.sh "$ctl" "$tmp/docs/operations.md" "$tmp" >"$tmp/out" 2>&1; then
		fail "'$2' in $1 was not caught"
	fi
	grep -q "$3" "$tmp/out" || fail "'$2' in $1: the message does not say '$3': $(cat "$tmp/out")"
	mv "$tmp/$1.orig" "$tmp/$1"
}
plant base/util.c 'static const char *x(void) { return getenv("ZSHARD_LOG"); }' "without zs_env"
plant client/zshard.c 'static const char *y(void) { return zs_env("ZSHARD_NEWTHING"); }' \
	"ZSHARD_NEWTHING is read but not listed"
plant python/zshard/_cli.py 'Z = os.environ.get("ZSHARD_OTHER")' "ZSHARD_OTHER is read but not listed"
plant server/writer.c 'static void z(void) { fault_point("new-point"); }' "fault point new-point"
cp "$tmp/docs/operations.md" "$tmp/operations.orig"
# shellcheck disable=SC2016 # the backquotes are the table's
sed -i 's/| `ZSHARD_LOG` | info |/| `ZSHARD_LOG` | warn |/' "$tmp/docs/operations.md"
if sh tests/lib/check-env.sh "$ctl" "$tmp/docs/operations.md" "$tmp" >"$tmp/out" 2>&1; then
	fail "a changed table was not caught"
fi
grep -q "the table in .* differs" "$tmp/out" || fail "a changed table: $(cat "$tmp/out")"
echo "env-fails: the check catches a getenv beside zs_env, unlisted variables (C, Python), an unlisted fault point and a changed table"
