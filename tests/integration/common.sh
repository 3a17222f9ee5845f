# common.sh - what the shell tests of this folder share; sourced after
# setting name (the test's name in its messages) and bin (the binaries):
#
#   zs_begin TAG       $dir, a fresh directory; $pids, the processes to end;
#                      at exit each is killed, zs_cleanup_more runs if the
#                      test defines it, and $dir goes (kept, and said, when
#                      $ZS_KEEP is set: a developer's look at the logs)
#   fail MSG           "NAME: FAILED: MSG", zs_fail_more if defined, the tail
#                      of every log in $dir; exit 1
#   skip MSG           "NAME: skipped: MSG"; exit 77
#   wait_file F S      until F is not empty, at most S seconds
#   free_port          a free TCP port on 127.0.0.1
#   start_coord [ARG]  a coordinator on 127.0.0.1:0 (more flags: ARG...);
#                      sets $addr; ctl runs zshardctl against it
#   wait_servers N [ARG]  until N servers are up (ARG: zshardctl flags), 10 s
#   train_pair WHAT FLAG...  ranks 1 and 0 of the example model (charlm with
#                      FLAG...: the job, the coordinator), 20 steps, their
#                      parameters in $dir/rankR.bin; "rank R did not train
#                      WHAT" when one fails
#   like_reference SPEC  rank 0's parameters against the single-process
#                      reference of SPEC after the same 20 steps
PY=${PYTHON:-/usr/bin/python3}

skip() { echo "$name: skipped: $*"; exit 77; }

zs_begin() {
	dir=$(mktemp -d "/tmp/zshard-$1-XXXXXX")
	pids=""
	trap zs_end EXIT
	# a test stopped by a signal (a timeout, ^C) cleans up too
	trap 'exit 1' INT TERM HUP
}

zs_end() {
	[ -n "${ZS_KEEP:-}" ] && { for p in $pids; do kill -9 "$p" 2>/dev/null; done; echo "kept $dir"; return; }
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	if command -v zs_cleanup_more >/dev/null 2>&1; then zs_cleanup_more; fi
	rm -rf "$dir"
}

fail() {
	echo "$name: FAILED: $*"
	if command -v zs_fail_more >/dev/null 2>&1; then zs_fail_more; fi
	for f in "$dir"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
	exit 1
}

wait_file() { # file seconds
	i=0
	while [ ! -s "$1" ] && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$1" ]
}

wait_until() { # seconds command...: true once the command succeeds, false past the deadline
	_end=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$_end" ] || return 1
		sleep 0.1
	done
}

free_port() {
	"$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_coord() {
	"$bin/zshard-coordinator" --listen 127.0.0.1:0 --data-dir "$dir/coord" \
		--port-file "$dir/coord.addr" "$@" >"$dir/coord.log" 2>&1 &
	pids="$pids $!"
	wait_file "$dir/coord.addr" 10 || fail "the coordinator did not start"
	addr=$(cat "$dir/coord.addr")
}

ctl() { "$bin/zshardctl" --coordinator "$addr" "$@"; }

wait_servers() { # n [zshardctl flags]
	want=$1
	shift
	i=0
	until [ "$(ctl "$@" servers 2>/dev/null | grep -c ' up ')" -ge "$want" ] || [ $i -ge 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 100 ]
}

train_pair() { # what charlm-flags...
	what=$1
	shift
	for r in 1 0; do
		"$bin/charlm" --rank $r --steps 20 --print-every 0 --dump "$dir/rank$r.bin" "$@" \
			>"$dir/rank$r.log" 2>&1 &
		eval "t$r=\$!"
	done
	wait "$t0" || fail "rank 0 did not train$what"
	wait "$t1" || fail "rank 1 did not train$what"
}

like_reference() { # spec
	"$bin/charlm" --reference --spec "$1" --world 2 --steps 20 --dump "$dir/ref.bin" \
		>"$dir/ref.log" 2>&1 || fail "the reference did not run"
	cmp -s "$dir/rank0.bin" "$dir/ref.bin" || fail "the parameters differ from the reference"
}
