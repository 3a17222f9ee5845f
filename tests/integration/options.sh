#!/bin/sh
# options.sh - zshardctl config check takes a value exactly when the daemon
# that reads it takes it as a flag: for every daemon key that
# zshardctl config keys lists (and the coordinator address the server
# takes), each of a set of values at and around every bound, of every kind,
# is given to zshardctl config check in a file and to the daemon as its
# flag (before --version, which exits once the flags are checked); the two
# must agree (config check approved rdma=maybe, gpu=banana, a step timeout
# the server refused, and refused the https:// etcd endpoints the
# coordinator takes); and each such flag is in the daemon's --help, which
# comes from the same table. Starts nothing that stays.
#
#   tests/integration/options.sh BIN_DIR
set -u
name=options bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
zs_begin options
: >"$dir/empty.pem"
values="0 1 50 99 100 2999 3000 3600 3601 64 65 86400000 86400001 1M 0M 1x -1 abc \
auto on off maybe emulated 1023 1024 127.0.0.1:0 127.0.0.1:7 127.0.0.1:99999 h:1,h:2 h:1,h \
http://127.0.0.1:2379 https://127.0.0.1:2 /etc/hostname /nonexistent /tmp debug warn banana"
n=0 keys=0
"$bin/zshardctl" config keys >"$dir/keys" || fail "zshardctl config keys"
while read -r key _; do
	case $key in
	server.*) prog=zshard-server flag=${key#server.} ;;
	coordinator.*) prog=zshard-coordinator flag=${key#coordinator.} ;;
	coordinator) prog=zshard-server flag=coordinator ;;
	*) continue ;; # the trainers' and zshardctl's, and TLS (its three files go together)
	esac
	flag=$(echo "$flag" | tr _ -)
	keys=$((keys + 1))
	# --help comes from the same table
	"$bin/$prog" --help | grep -q -- "--$flag " || fail "$prog --help does not list --$flag"
	for v in $values; do
		printf '%s = %s\n' "$key" "$v" >"$dir/c.conf"
		if "$bin/zshardctl" config check "$dir/c.conf" >"$dir/check.out" 2>&1; then c=took; else c=refused; fi
		if "$bin/$prog" "--$flag=$v" --version >"$dir/daemon.out" 2>&1; then d=took; else d=refused; fi
		[ "$c" = "$d" ] || fail "$key = $v: zshardctl config check $c it ($(tail -1 "$dir/check.out")), $prog --$flag $d it ($(tail -1 "$dir/daemon.out"))"
		n=$((n + 1))
	done
done <"$dir/keys"
[ "$keys" -ge 20 ] || fail "only $keys daemon keys listed by zshardctl config keys"
echo "options: passed ($keys daemon keys x $(echo $values | wc -w) values: zshardctl config check and the daemons agree on all $n)"
