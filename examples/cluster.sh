# cluster.sh - sourced by the example scripts (demo.sh, gpt.sh): sets root
# and bin, and start_cluster N DIR starts a local cluster of N shard servers
# with its state in DIR (sets dir and addr) that stops when the script exits
# or at stop_cluster.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/build/bin
launcher=$root/deploy/local/zshard-local

stop_cluster() {
	"$launcher" stop --dir "$dir" >/dev/null 2>&1 || true
	trap - EXIT
}

start_cluster() {
	dir=$2
	trap stop_cluster EXIT
	addr=$("$launcher" start --servers "$1" --dir "$dir")
	echo "== cluster up: coordinator $addr, $1 shard servers (state in $dir)"
}
