#!/bin/sh
# check-install.sh - make install into a scratch prefix, then build a small
# trainer against the installed tree with pkg-config alone (shared and
# static), run both, and check the soname and the layout. Leaves nothing.
#
#   tests/lib/check-install.sh BUILD_DIR CC [EXTRA_CFLAGS]
#
# EXTRA_CFLAGS: the sanitizer flags of a sanitized build, whose library
# needs its runtime linked into the program too.
set -eu
build=$1
cc=${2:-cc}
extra=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "install: $*"; exit 1; }

make --no-print-directory -s install BUILD="$build" PREFIX="$prefix" > "$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "make install PREFIX=$prefix failed"; }
for f in include/zshard.h include/zshard_status.h lib/libzshard.so.0 lib/libzshard.so \
	 lib/libzshard.a lib/pkgconfig/zshard.pc bin/zshard-server bin/zshard-coordinator \
	 bin/zshardctl share/man/man1/zshard-server.1 share/man/man1/zshard-coordinator.1 \
	 share/man/man1/zshardctl.1 share/man/man1/zshard-local.1; do
	[ -e "$prefix/$f" ] || fail "$f is not installed"
done
# the installed pages read as man reads them (MANPATH=PREFIX/share/man)
MANPATH=$prefix/share/man man -P cat zshard-server 2>/dev/null | grep -q -- '--reader-budget' ||
	fail "man zshard-server (MANPATH=$prefix/share/man) does not show its flags"
soname=$(readelf -d "$prefix/lib/libzshard.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libzshard.so.0 ] || fail "soname is '$soname', not libzshard.so.0"

cat > "$tmp/hello.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <zshard.h>

/* Joins a coordinator that is not there: the public API must say so with
 * ZS_EUNAVAIL and a message, and name its statuses. */
int main(void)
{
	char err[256] = "";
	zs_trainer *t = NULL;
	int rc = zs_trainer_join("127.0.0.1:1", "nojob", 0, "tcp", 500, &t, err, sizeof err);

	if (rc != ZS_EUNAVAIL || t || !err[0]) {
		fprintf(stderr, "join: %d (%s) %s\n", rc, zs_strerror(rc), err);
		return 1;
	}
	if (strcmp(zs_strerror(ZS_ENOTFOUND), "not found")) {
		fprintf(stderr, "zs_strerror: %s\n", zs_strerror(ZS_ENOTFOUND));
		return 1;
	}
	printf("%s\n", zs_strerror(rc));
	return 0;
}
C
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046,SC2086
"$cc" $extra -Wall -Wextra -Werror -o "$tmp/hello" "$tmp/hello.c" $(pkg-config --cflags --libs zshard) ||
	fail "a program does not build with pkg-config --cflags --libs zshard"
out=$(LD_LIBRARY_PATH="$prefix/lib" "$tmp/hello") || fail "the shared-library program failed"
ldd "$tmp/hello" | grep -q "$prefix/lib/libzshard.so.0" 2>/dev/null ||
	LD_LIBRARY_PATH="$prefix/lib" ldd "$tmp/hello" | grep -q "$prefix/lib/libzshard.so.0" ||
	fail "the program is not linked against the installed libzshard.so.0"
libdir=$(pkg-config --variable=libdir zshard)
# shellcheck disable=SC2046,SC2086
"$cc" $extra -Wall -Wextra -Werror -o "$tmp/hello-static" "$tmp/hello.c" $(pkg-config --cflags zshard) \
	"$libdir/libzshard.a" $(pkg-config --static --libs zshard | sed 's/-lzshard//') ||
	fail "a program does not build with the static libzshard.a"
"$tmp/hello-static" > /dev/null || fail "the static program failed"
echo "install: make install PREFIX=... gives headers, libzshard.so.0 ($soname), libzshard.a, zshard.pc and the binaries; a program built with pkg-config alone runs ($out), shared and static"
