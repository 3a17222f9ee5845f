#!/bin/sh
# check-exports.sh - libzshard.so exports exactly the functions its public
# headers declare: nothing internal (no st_open, no protobuf-c symbols that
# could clash with an application's own), nothing declared but missing.
#
#   tests/lib/check-exports.sh LIBZSHARD.so HEADER...
set -eu
so=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the functions the headers declare: a name followed by '(' at the start of
# a declaration (after its return type), outside comments
for h in "$@"; do
	sed -e 's|/\*.*\*/||g' -e '/\/\*/,/\*\//d' "$h"
done | tr '\n' ' ' | tr ';' '\n' |
	sed -n 's/^[[:space:]]*\(typedef\|struct\|enum\|#\)[^(]*$//; s/.*[[:space:]*]\(zs_[a-z0-9_]*\)[[:space:]]*(.*/\1/p' |
	sort -u > "$tmp/declared"
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRWVi]$/ { print $3 }' | sort -u > "$tmp/exported"

n_decl=$(wc -l < "$tmp/declared")
if [ "$n_decl" -lt 10 ]; then
	echo "exports: only $n_decl functions found in $* - the header scan is broken"
	exit 1
fi
if ! cmp -s "$tmp/declared" "$tmp/exported"; then
	echo "exports: $so does not export exactly what $* declare:"
	comm -13 "$tmp/declared" "$tmp/exported" | sed 's/^/  exported, not declared: /' | head -20
	comm -23 "$tmp/declared" "$tmp/exported" | sed 's/^/  declared, not exported: /'
	exit 1
fi
echo "exports: $(basename "$so") exports exactly the $n_decl functions of $*"
