#!/bin/sh
# check-env.sh ZSHARDCTL DOC [ROOT] - the environment variables against
# base/env.c's list (zshardctl env): no getenv of a ZSHARD_ name outside
# base/env.c in the C sources; every name the C code (zs_env, zs_env_uint),
# the Python package and zshard-local read is listed, and every listed one
# is read; every fault point zs_fault names is listed and every listed one
# is named by the code; the table in DOC (docs/operations.md) is zshardctl env --markdown. ROOT:
# the tree to read (default .; check-env-fails.sh plants faults in a copy).
# shellcheck disable=SC2046,SC2086,SC2016 # file lists split on purpose; '$' is grep's
set -u
ctl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
readme=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
cd "${3:-.}" || exit 1
dirs="base model math gpu storage net ctrl metrics rdma client engine server coord cli"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

"$ctl" env --names | sort >"$tmp/listed" || { echo "env: zshardctl env --names failed"; exit 1; }
"$ctl" env --faults | sort >"$tmp/points"
if grep -n 'getenv("ZSHARD_' $(find $dirs -name '*.c' -o -name '*.h' -o -name '*.cu') |
	grep -v '^base/env\.c:'; then
	echo "env: the lines above read a ZSHARD_ variable without zs_env (base/env.h)"
	fail=1
fi
# what the code reads: C through zs_env, Python through os.environ, the launcher
{
	grep -ho 'zs_env\(_uint\)\?("ZSHARD_[A-Z0-9_]*"' $(find $dirs -name '*.c') |
		sed 's/.*"\(ZSHARD_[A-Z0-9_]*\)"/\1/'
	grep -rho 'environ\(\.get\)\?[[(]"ZSHARD_[A-Z0-9_]*"' python/zshard |
		sed 's/.*"\(ZSHARD_[A-Z0-9_]*\)"/\1/'
	grep -o '\${\?ZSHARD_[A-Z0-9_]*' deploy/local/zshard-local | tr -d '${'
} | sort -u >"$tmp/read"
for n in $(comm -23 "$tmp/read" "$tmp/listed"); do
	echo "env: $n is read but not listed in base/env.c"
	fail=1
done
for n in $(comm -13 "$tmp/read" "$tmp/listed"); do
	echo "env: $n is listed in base/env.c but nothing reads it"
	fail=1
done
grep -ho 'zs_fault("[a-z0-9-]*")\|fault_point("[a-z0-9-]*")' $(find $dirs -name '*.c') |
	sed 's/.*("\([a-z0-9-]*\)")/\1/' | sort -u >"$tmp/named"
for p in $(comm -3 "$tmp/named" "$tmp/points" | tr -d '\t'); do
	echo "env: fault point $p is named by the code or listed in base/env.c, not both"
	fail=1
done
"$ctl" env --markdown >"$tmp/table"
sed -n '/^<!-- env: begin/,/^<!-- env: end/p' "$readme" | sed '1d;$d' >"$tmp/readme"
if ! cmp -s "$tmp/table" "$tmp/readme"; then
	diff "$tmp/readme" "$tmp/table" | head -20
	echo "env: the table in $2 differs from zshardctl env --markdown (above: < the doc, > the list)"
	fail=1
fi
[ $fail -eq 0 ] && echo "env: $(wc -l <"$tmp/listed") variables and $(wc -l <"$tmp/points") fault points, each read where listed; the table in $2 is the list"
exit $fail
