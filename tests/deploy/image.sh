#!/bin/sh
# image.sh - deploy/kubernetes/Containerfile built and run for real, with
# podman from Debian, where no registry is reachable: a minimal Debian 12
# made here with debootstrap is imported as the base both stages start from
# (BASE), the image built from this checkout, and then, as the Kubernetes
# manifest runs it (its own network, an address per container, the same
# ports in each, uid 10001, state on a volume):
#
#   1. the coordinator and two servers, each a container of the image on a
#      network of their own; two ranks of the example model train 20 steps
#      against them from the host (the containers' addresses)
#   2. the image's zshardctl, in a container, shows the placement (every
#      shard on one of the two servers, at its container's address) and
#      exports the job to a volume: the file holds rank 0's parameters, and
#      both equal the single-process reference's bit for bit
#   3. the three containers stopped (SIGTERM: the servers keep the live
#      state) and started again: the job is there at step 20 and exports the
#      same bytes
#
#   tests/deploy/image.sh BIN_DIR [BASE_CACHE]
#
# BASE_CACHE, when given, is a tar of the debootstrap'd base kept between
# runs (made when missing). podman runs on a store, network configuration
# and runtime folder of its own under the test's directory, so that the
# images, containers and network it makes go with it; as root. Leaves no
# process, container, mount or directory behind.
set -u
name=image bin=$1
cache=${2:-}
case $bin in /*) ;; *) bin=$(cd "$bin" && pwd) ;; esac
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../integration/common.sh"

[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, podman's own store)"
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 ||
	! command -v debootstrap >/dev/null 2>&1; then
	echo "image: installing podman, runc and debootstrap from Debian"
	apt-get update -qq >/dev/null 2>&1
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
		podman runc debootstrap >/dev/null || fail "apt-get could not install podman"
fi

zs_begin image
store=$dir/podman
mkdir -p "$store/networks"
# runc, not crun: crun refuses a hybrid cgroup hierarchy like this
# machine's; the limits a container gets stay within this machine's (a
# root without CAP_SYS_RESOURCE cannot raise them); logs in files
# shellcheck disable=SC3045 # dash's ulimit has -H
cat >"$store/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
log_driver = "k8s-file"
[engine]
runtime = "runc"
[network]
network_config_dir = "$store/networks"
EOF
export CONTAINERS_CONF="$store/containers.conf"
pm() { podman --root "$store/root" --runroot "$store/run" "$@"; }
zs_cleanup_more() {
	pm rm -a -f -t 5 >/dev/null 2>&1
	pm network rm -f zshard-test >/dev/null 2>&1
	pm system reset -f >/dev/null 2>&1
	grep -o " ${store}[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
}
zs_fail_more() {
	for c in coord s1 s2; do echo "--- container $c"; pm logs --tail 8 "$c" 2>&1; done
}

# the base: a minimal Debian 12, imported (the registry's debian:12 made
# here)
if [ -n "$cache" ] && [ -s "$cache" ]; then
	echo "image: the base from $cache"
else
	echo "image: a minimal Debian 12 for the base (debootstrap)"
	debootstrap --variant=minbase bookworm "$dir/base" http://deb.debian.org/debian \
		>"$dir/debootstrap.log" 2>&1 || fail "debootstrap failed: $(tail -n 3 "$dir/debootstrap.log")"
	rm -rf "$dir/base/var/cache/apt/archives/"*.deb "$dir/base/var/lib/apt/lists/"*
	tar -C "$dir/base" -cf "$dir/base.tar" . && rm -rf "$dir/base"
	cache=${cache:-$dir/base.tar}
	[ "$cache" = "$dir/base.tar" ] || { mkdir -p "$(dirname "$cache")" && mv "$dir/base.tar" "$cache"; }
fi
pm import "$cache" localhost/zshard-base:bookworm >/dev/null 2>&1 || fail "podman could not import the base"
version=$(cat "$root/VERSION")
img=localhost/zshard:$version
echo "image: podman build -f deploy/kubernetes/Containerfile -t $img"
t0=$(date +%s)
(cd "$root" && pm build --network=host --pull=never --build-arg BASE=localhost/zshard-base:bookworm \
	-f deploy/kubernetes/Containerfile -t "$img" .) >"$dir/build.log" 2>&1 ||
	fail "the image did not build: $(tail -n 5 "$dir/build.log")"
build_s=$(($(date +%s) - t0))
pm run --rm "$img" id -u 2>"$dir/id.log" | grep -qx 10001 || fail "the image does not run as uid 10001"

# 1. the cluster as containers on a network of their own, trainers on the host
pm network create zshard-test >/dev/null || fail "podman network create failed"
subnet=$(pm network inspect zshard-test --format '{{range .Subnets}}{{.Subnet}}{{end}}')
net=${subnet%.*/*}
case $net in *.*.*) ;; *) fail "cannot read the network's subnet ($subnet)" ;; esac
mkdir -p "$dir/vol/coord" "$dir/vol/s1" "$dir/vol/s2" "$dir/out"
chown 10001:10001 "$dir/vol/coord" "$dir/vol/s1" "$dir/vol/s2" "$dir/out"
coord_ip=$net.10
addr=$coord_ip:7400
# the containers' processes are the store's (pids end them by podman)
up() { # NAME IP VOLUME COMMAND...: a detached container of the image
	n=$1 ip=$2 vol=$3
	shift 3
	pm run -d --name "$n" --network zshard-test --ip "$ip" --shm-size 512m \
		-v "$vol:/var/lib/zshard" "$img" "$@" >/dev/null || fail "container $n did not start"
}
start_all() {
	up coord "$coord_ip" "$dir/vol/coord" zshard-coordinator --listen 0.0.0.0:7400 \
		--advertise "$coord_ip" --data-dir /var/lib/zshard/catalog --lease-ms 3000
	for i in 1 2; do
		up s$i "$net.1$i" "$dir/vol/s$i" zshard-server --coordinator "$addr" \
			--data-dir /var/lib/zshard/data --listen 0.0.0.0:7401 --data-listen 0.0.0.0:7501 \
			--advertise "$net.1$i" --capacity 256M --rdma off
	done
	i=0
	until [ "$(ctl servers 2>/dev/null | grep -c ' up ')" -ge 2 ] || [ $i -ge 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 300 ] || fail "the two server containers did not register within 30 s"
}
start_all
"$bin/charlm" --print-spec --job img --world 2 --stage 3 >"$dir/img.json"
ctl job create "$dir/img.json" >/dev/null || fail "cannot create the job"
train_pair " against the containers" --coordinator "$addr" --job img --transport tcp
like_reference "$dir/img.json"

# 2. the image's zshardctl: placement and export
ictl() { pm run --rm --network zshard-test -v "$dir/out:/out" "$img" zshardctl --coordinator "$addr" "$@"; }
ictl placement img --json >"$dir/placement.json" 2>"$dir/ictl.log" || fail "placement from the image's zshardctl"
"$PY" - "$dir/placement.json" "$net" <<'EOF' || fail "the placement is not the two server containers'"
import json, sys
p, net = json.load(open(sys.argv[1])), sys.argv[2]
want = {net + ".11:7401", net + ".12:7401"}
at = {s["server_addr"] for s in p["shards"]}
assert at == want, "shards at %s, not %s" % (sorted(at), sorted(want))
for u in p["units"]:  # every unit's elements on the servers, once
    n = sum(s["length"] for s in p["shards"] if s["unit"] == u["index"])
    assert n == u["numel"], "unit %s: %d of %d elements placed" % (u["name"], n, u["numel"])
EOF
ictl servers >"$dir/servers.txt" 2>"$dir/ictl.log" || fail "servers from the image's zshardctl"
grep -q "$net.11:7401" "$dir/servers.txt" && grep -q "$net.12:7401" "$dir/servers.txt" ||
	fail "the servers are not at their containers' addresses: $(cat "$dir/servers.txt")"
ictl export img --out /out/img.safetensors >"$dir/export.log" 2>&1 ||
	fail "export from the image's zshardctl: $(cat "$dir/export.log")"
same_as() { # SAFETENSORS RAW: the file's tensors, in file order, are RAW's bytes
	"$PY" - "$1" "$2" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)
ts = sorted(h.values(), key=lambda v: v["data_offsets"][0])
data = b"".join(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for v in ts)
sys.exit(data != open(sys.argv[2], "rb").read())
EOF
}
same_as "$dir/out/img.safetensors" "$dir/rank0.bin" || fail "the export is not rank 0's parameters"

# 3. stopped (SIGTERM) and started again: the state outlives the containers
for c in s1 s2 coord; do pm stop -t 60 "$c" >/dev/null || fail "podman stop $c"; done
for c in s1 s2; do
	pm logs "$c" 2>&1 | grep -q "live state at step 20 kept" || fail "server $c did not keep the job's state on SIGTERM"
done
pm rm coord s1 s2 >/dev/null
start_all
ictl job show img >"$dir/show.txt" 2>&1 || fail "the job is gone after a restart: $(cat "$dir/show.txt")"
mv "$dir/out/img.safetensors" "$dir/first.safetensors"
ictl export img --out /out/img.safetensors >"$dir/export.log" 2>&1 ||
	fail "export after the restart: $(cat "$dir/export.log")"
cmp -s "$dir/first.safetensors" "$dir/out/img.safetensors" || fail "after a restart the export differs"
grep -q "step 20" "$dir/export.log" || fail "after a restart the job is not at step 20: $(cat "$dir/export.log")"
size=$(pm image inspect "$img" --format '{{.Size}}')
echo "image: passed ($img built in $build_s s, $((size / 1048576)) MiB, uid 10001; coordinator and 2 servers as containers on their own network; 2 ranks trained from the host bitwise the reference; the image's zshardctl showed the placement on both containers and exported rank 0's parameters; stopped and started again, the job was at step 20 with the same export)"
