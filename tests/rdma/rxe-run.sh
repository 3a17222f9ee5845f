#!/bin/bash
# rxe-run.sh - run an RDMA (ibverbs / librdmacm) test program against a
# Soft-RoCE (rdma_rxe) device inside a throw-away qemu guest.
#
# Works on a host with no RDMA hardware, no RDMA kernel support and no KVM:
# the guest is a stock Debian kernel booted under qemu TCG (pure emulation,
# PVH direct boot of the uncompressed vmlinux) with a busybox initramfs that
# holds the test program, its shared libraries, the rxe userspace provider
# and the kernel modules needed.  No network traffic leaves the guest
# (qemu runs with -nic none; rxe runs on a dummy/veth device inside it; in
# two-guest mode the guests' NICs are joined by unix datagram sockets).
#
# Usage: rxe-run.sh [options] [--] TEST [ARGS...]
#   TEST          executable (ELF, dynamic or static, or a #!/bin/sh script)
#                 copied into the guest as /test/<basename> and run from /test
#                 as root with:  RXE_DEV=rxe0 RXE_NETDEV=rxenet0 RXE_IP=10.0.0.1
#                 RXE_GID_INDEX=1 (the IPv4-mapped RoCEv2 GID of rxe0)
#   -b PATH       extra executable for the guest's /usr/bin (repeatable; its
#                 shared libs are added too), e.g. -b ibv_rc_pingpong
#   -f SRC[:DST]  extra file/dir to copy into the guest (DST default /test/<name>)
#   -t SECONDS    overall timeout for the guest (default 300)
#   -m MiB        guest memory (default 1024)
#   -s N          guest vCPUs (default: host cores, at most 4; >=2 recommended
#                 when the test busy-polls from two processes/threads)
#   -n NETDEV     netdev carrying rxe0: dummy (default) | veth
#   -2            two guests joined by a virtual Ethernet link (qemu dgram
#                 netdev over unix sockets), rxe0 on each guest's virtio-net NIC;
#                 TEST runs in both: RXE_ROLE=server, RXE_IP=10.0.0.1 in one,
#                 RXE_ROLE=client, RXE_IP=10.0.0.2 in the other, RXE_PEER_IP =
#                 the other's IP.  Exit status: client's if non-zero, else
#                 server's.  (Single-guest mode: RXE_ROLE=single,
#                 RXE_PEER_IP=RXE_IP.)
#   -k            keep the work directory (initramfs, console log)
#   -q            do not echo the guest console (still saved in the work dir)
#   -v            verbose guest kernel (no "quiet" on the kernel command line)
# Environment:
#   RXE_CACHE       kernel + base initramfs cache (default <script dir>/cache)
#   RXE_KERNEL_PKG  Debian kernel package (default: the one linux-image-amd64
#                   depends on, e.g. linux-image-6.1.0-57-amd64)
#   RXE_APPEND      extra guest kernel command-line arguments
#   RXE_TMPDIR      where per-run work dirs are made (default $RXE_CACHE/work)
# Exit status: the test's exit status; 124 on timeout; 125 on harness error.
#
# Host packages (Debian 12): qemu-system-x86 busybox-static cpio kmod
#   iproute2 xz-utils libibverbs1 ibverbs-providers (+ what TEST links to).
#   First run downloads the kernel .deb with `apt-get download` (~70 MB).
set -uo pipefail

die() { echo "rxe-run: $*" >&2; exit 125; }
now() { date +%s.%N; }
T0=$(now)

TIMEOUT=300 MEM=1024 KEEP=0 QUIET=0 NETDEV=dummy KQUIET="quiet loglevel=3" TWO=0
SMP=$(nproc); [ "$SMP" -gt 4 ] && SMP=4
EXTRA_BINS=() EXTRA_FILES=()
while getopts "b:f:t:m:s:n:kqv2h" o; do
  case $o in
    b) EXTRA_BINS+=("$OPTARG");; f) EXTRA_FILES+=("$OPTARG");;
    t) TIMEOUT=$OPTARG;; m) MEM=$OPTARG;; s) SMP=$OPTARG;; n) NETDEV=$OPTARG;;
    k) KEEP=1;; q) QUIET=1;; v) KQUIET="";; 2) TWO=1;;
    h) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0;;
    *) exit 125;;
  esac
done
shift $((OPTIND-1))
[ $# -ge 1 ] || die "usage: $0 [options] TEST [ARGS...]  (-h for help)"
case $NETDEV in dummy|veth) ;; *) die "-n must be dummy or veth";; esac
TEST=$(readlink -f "$1") || die "no such test: $1"; shift
[ -f "$TEST" ] && [ -x "$TEST" ] || die "not an executable file: $TEST"
for t in qemu-system-x86_64 cpio depmod modprobe ldd xz sha1sum; do
  command -v $t >/dev/null || die "missing host tool: $t"
done
BUSYBOX=$(command -v busybox) || die "missing busybox (apt-get install busybox-static)"
case "$(ldd "$BUSYBOX" 2>&1)" in *"not a dynamic"*) ;; *) die "busybox must be static (busybox-static)";; esac

SCRIPT=$(readlink -f "$0")
CACHE=${RXE_CACHE:-$(dirname "$SCRIPT")/cache}
mkdir -p "$CACHE" || die "cannot create $CACHE"
exec 9>"$CACHE/.lock"; flock 9      # serialise cache updates between runs

# ---------------------------------------------------------------- kernel ---
KPKG=${RXE_KERNEL_PKG:-}
if [ -z "$KPKG" ]; then
  KPKG=$(ls -d "$CACHE"/linux-image-*/ 2>/dev/null | head -1 | xargs -r basename)
  [ -n "$KPKG" ] || KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
                          awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
[ -n "$KPKG" ] || die "cannot determine kernel package (set RXE_KERNEL_PKG)"
KDIR=$CACHE/$KPKG
if [ ! -f "$KDIR/.ok" ]; then
  echo "rxe-run: fetching $KPKG into $KDIR" >&2
  rm -rf "$KDIR"; mkdir -p "$KDIR"
  (cd "$CACHE" && apt-get download "$KPKG" >/dev/null 2>&1) || die "apt-get download $KPKG failed"
  dpkg -x "$CACHE/${KPKG}"_*.deb "$KDIR" || die "dpkg -x failed"
  rm -f "$CACHE/${KPKG}"_*.deb
  KV=$(ls "$KDIR/lib/modules" | head -1)
  depmod -b "$KDIR" "$KV" || die "depmod failed"
  # Uncompressed vmlinux: qemu boots it directly via the PVH entry point
  # (CONFIG_PVH=y), skipping firmware + in-guest xz decompression, which
  # under TCG costs ~10 s per boot.
  V=$KDIR/boot/vmlinuz-$KV
  off=$(grep -abo $'\xfd7zXZ\x00' "$V" | head -1 | cut -d: -f1)
  if [ -n "$off" ] && tail -c +$((off+1)) "$V" | xz -dc 2>/dev/null > "$KDIR/boot/vmlinux-$KV.tmp";
     [ -s "$KDIR/boot/vmlinux-$KV.tmp" ] && [ "$(head -c4 "$KDIR/boot/vmlinux-$KV.tmp")" = $'\x7fELF' ]; then
    mv "$KDIR/boot/vmlinux-$KV.tmp" "$KDIR/boot/vmlinux-$KV"
  else
    rm -f "$KDIR/boot/vmlinux-$KV.tmp"
  fi
  touch "$KDIR/.ok"
fi
KVER=$(ls "$KDIR/lib/modules" | head -1)
KERNEL=$KDIR/boot/vmlinux-$KVER
grep -q '^CONFIG_PVH=y' "$KDIR/boot/config-$KVER" 2>/dev/null && [ -f "$KERNEL" ] ||
  KERNEL=$KDIR/boot/vmlinuz-$KVER
[ -f "$KERNEL" ] || die "no kernel image in $KDIR"

# --------------------------------------------------------------- helpers ---
copy_with_libs() {  # $1 = root dir, $2 = file to copy, $3 = destination path in root
  local R=$1 lib
  mkdir -p "$R/$(dirname "$3")"; cp -L "$2" "$R/$3" || return 1
  { ldd "$2" 2>/dev/null || true; } | grep -oE '/[^ ]+' | while read -r lib; do
    [ -e "$R/$lib" ] || { mkdir -p "$R/$(dirname "$lib")"; cp -L "$lib" "$R/$lib"; }
  done
  return 0
}
mkcpio() { (cd "$1" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet); }

# ---------------------------------------- base initramfs (cached, shared) ---
# busybox, kernel modules, ip/rdma, rxe provider, libgcc_s, /init.
PKGV=$(dpkg-query -W -f '${Package}=${Version} ' busybox-static iproute2 libibverbs1 \
       ibverbs-providers libc6 libgcc-s1 2>/dev/null)
KEY=$( { sed -n '/^# @@BASE-BEGIN/,/^# @@BASE-END/p' "$SCRIPT"; echo "$KPKG $PKGV"; } | sha1sum | cut -c1-12)
BASE=$CACHE/base-$KVER-$KEY.cpio
# @@BASE-BEGIN (edits to this block invalidate cached base images)
if [ ! -s "$BASE" ]; then
  B=$(mktemp -d "$CACHE/base.XXXXXX")
  R=$B/root
  mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,proc,sys,dev,tmp,run,etc/libibverbs.d,test,root}
  cp "$BUSYBOX" "$R/bin/busybox"
  for a in $("$BUSYBOX" --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
  # Debian's busybox ash runs its own applets in preference to $PATH (so `ip`
  # would be busybox's, without netns etc.): use dash as /bin/sh when present.
  if [ -x /bin/dash ]; then rm -f "$R/bin/sh"; copy_with_libs "$R" /bin/dash /bin/sh; fi
  rm -f "$R/bin/ip"     # iproute2's ip is installed in /usr/sbin below
  # Kernel modules in load order.  rdma_rxe needs the "crc32" crypto algorithm
  # (crc32_generic / crc32_pclmul), which the kernel would request_module();
  # /sbin/modprobe (busybox) + a subset modules.dep cover any other request.
  # tls: kernel TLS, for the encrypted data plane's records (test_dtls),
  # with the AES-GCM it asks the crypto API for (the gcm template on ctr
  # and ghash; aesni where the guest CPU has AES-NI)
  MODS="crc32_generic crc32_pclmul udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe
        configfs ib_cm iw_cm rdma_cm rdma_ucm ib_umad dummy veth virtio_pci virtio_net
        ctr ghash_generic gcm aesni_intel ghash_clmulni_intel tls"
  MB=$KDIR/lib/modules/$KVER
  for m in $MODS; do
    modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}'
  done | awk '!seen[$0]++' | while read -r ko; do
    rel=${ko#$MB/}; mkdir -p "$R/lib/modules/$KVER/$(dirname "$rel")"
    cp "$ko" "$R/lib/modules/$KVER/$rel"; echo "$rel" >> "$R/modules.list"
  done
  grep -q rdma_rxe "$R/modules.list" 2>/dev/null || die "no rdma_rxe module (CONFIG_RDMA_RXE?)"
  cp "$MB"/modules.order "$MB"/modules.builtin* "$R/lib/modules/$KVER/" 2>/dev/null
  depmod -b "$R" "$KVER" 2>/dev/null
  for b in rdma ip; do
    p=$(command -v $b) || die "missing host tool: $b (iproute2)"; copy_with_libs "$R" "$p" "/usr/sbin/$b"
  done
  # userspace verbs provider for rxe (dlopen()ed by libibverbs)
  [ -f /etc/libibverbs.d/rxe.driver ] && cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/" ||
    echo "rxe-run: warning: no rxe provider (apt-get install ibverbs-providers)" >&2
  for p in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so; do
    [ -f "$p" ] && copy_with_libs "$R" "$p" "$p"
  done
  # dlopen()ed by glibc for pthread_exit/pthread_cancel unwinding
  for p in /lib/x86_64-linux-gnu/libgcc_s.so.1; do [ -f "$p" ] && copy_with_libs "$R" "$p" "$p"; done
  [ -e "$R/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
  echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"
  echo "root:x:0:" > "$R/etc/group"
  printf '127.0.0.1 localhost\n10.0.0.1 rxe-guest\n' > "$R/etc/hosts"
  cat > "$R/init" <<'EOF'
#!/bin/sh
export PATH=/test:/usr/bin:/usr/sbin:/bin:/sbin HOME=/root
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp
hostname rxe-guest
up() { cut -d' ' -f1 /proc/uptime; }
echo "@@RXE boot done at $(up)s guest uptime"
. /test.conf
for m in $(cat /modules.list); do
  insmod /lib/modules/$(uname -r)/$m 2>/dev/null || echo "@@RXE insmod $m failed"
done
ip link set lo up
RXE_IP=10.0.0.1 RXE_PEER_IP=10.0.0.1 RXE_ROLE=single
for a in $(cat /proc/cmdline); do
  case $a in rxe.ip=*) RXE_IP=${a#*=};; rxe.peer=*) RXE_PEER_IP=${a#*=};;
             rxe.role=*) RXE_ROLE=${a#*=}; RXE_NETDEV_TYPE=nic;; esac
done
if [ "$RXE_NETDEV_TYPE" = nic ]; then       # two-guest mode: virtio-net NIC
  n=0; while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done
  ip link set eth0 name rxenet0
elif [ "$RXE_NETDEV_TYPE" = veth ]; then
  ip link add rxenet0 type veth peer name rxenet1 && ip link set rxenet1 up
else
  ip link add rxenet0 type dummy
fi
ip addr add $RXE_IP/24 dev rxenet0 && ip link set rxenet0 up
if ! rdma link add rxe0 type rxe netdev rxenet0; then
  echo "@@RXE rdma link add failed"; dmesg | tail -20
fi
ulimit -l unlimited 2>/dev/null
rdma link show
echo "@@RXE setup done at $(up)s"
cd /test
export RXE_DEV=rxe0 RXE_NETDEV=rxenet0 RXE_IP RXE_PEER_IP RXE_ROLE RXE_GID_INDEX=1
/test/.run
rc=$?
echo "@@RXE test done at $(up)s"
echo "@@RXE_TEST_EXIT=$rc@@"
sync
poweroff -f
EOF
  chmod +x "$R/init"
  mkcpio "$R" > "$B/base.cpio" || die "cpio failed"
  rm -f "$CACHE"/base-*.cpio        # stale images of other versions
  mv "$B/base.cpio" "$BASE"; rm -rf "$B"
fi
# @@BASE-END
exec 9>&-

# ------------------------------------------------- per-test initramfs ---
mkdir -p "${RXE_TMPDIR:-$CACHE/work}" || die "cannot create work dir"
WORK=$(mktemp -d "${RXE_TMPDIR:-$CACHE/work}/rxe-test.XXXXXX")
cleanup() { if [ "$KEEP" = 1 ]; then echo "rxe-run: kept $WORK" >&2; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
R=$WORK/root; mkdir -p "$R/test"
TESTNAME=$(basename "$TEST")
copy_with_libs "$R" "$TEST" "/test/$TESTNAME" || die "cannot copy $TEST"
for b in "${EXTRA_BINS[@]}"; do
  p=$(command -v "$b") || die "no such binary: $b"; copy_with_libs "$R" "$p" "/usr/bin/$(basename "$p")"
done
for f in "${EXTRA_FILES[@]}"; do
  src=${f%%:*}; dst=${f#*:}; [ "$dst" = "$f" ] && dst=/test/$(basename "$src")
  mkdir -p "$R/$(dirname "$dst")"; cp -rL "$src" "$R/$dst" || die "cannot copy $src"
done
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
ARGS=""; for a in "$@"; do ARGS="$ARGS $(q "$a")"; done
echo "RXE_NETDEV_TYPE=$NETDEV" > "$R/test.conf"
printf '#!/bin/sh\nexec %s%s\n' "$(q "/test/$TESTNAME")" "$ARGS" > "$R/test/.run"
chmod +x "$R/test/.run"
# The kernel unpacks concatenated cpio archives in order.
{ cat "$BASE"; mkcpio "$R"; } > "$WORK/initramfs.cpio" || die "cpio failed"

# ------------------------------------------------------------------ boot ---
T1=$(now)
boot() {  # $1 = log file, $2 = console prefix, $3 = extra -append, rest = extra qemu args
  local log=$1 pfx=$2 app=$3; shift 3
  local Q=(qemu-system-x86_64 -machine q35 -accel tcg -cpu max -smp "$SMP" -m "$MEM"
      -display none -monitor none -serial stdio -no-reboot "$@"
      -kernel "$KERNEL" -initrd "$WORK/initramfs.cpio"
      -append "console=ttyS0 $KQUIET panic=-1 rdinit=/init mitigations=off $app ${RXE_APPEND:-}")
  if [ "$QUIET" = 1 ]; then
    timeout "$TIMEOUT" "${Q[@]}" </dev/null >"$log" 2>&1; echo $? > "$log.rc"
  else
    timeout "$TIMEOUT" "${Q[@]}" </dev/null 2>&1 | tee "$log" | sed -u "s/^/$pfx/"
    echo "${PIPESTATUS[0]}" > "$log.rc"
  fi
}
result() {  # $1 = log -> prints exit code, or 124 (timeout) / 125 (no result)
  local r; r=$(grep -a -o '@@RXE_TEST_EXIT=[0-9]*@@' "$1" | tail -1 | tr -dc 0-9)
  if [ -n "$r" ]; then echo "$r"; elif [ "$(cat "$1.rc")" = 124 ]; then echo 124; else echo 125; fi
}
if [ "$TWO" = 1 ]; then
  # qemu dgram netdev over two unix datagram sockets: a point-to-point
  # Ethernet link between the guests that never touches the host's network
  P1=$WORK/s.sock P2=$WORK/c.sock
  NET() { echo "dgram,id=n0,local.type=unix,local.path=$1,remote.type=unix,remote.path=$2"; }
  boot "$WORK/server.log" "[server] " "rxe.role=server rxe.ip=10.0.0.1 rxe.peer=10.0.0.2" \
       -netdev "$(NET $P1 $P2)" -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:01 &
  boot "$WORK/client.log" "[client] " "rxe.role=client rxe.ip=10.0.0.2 rxe.peer=10.0.0.1" \
       -netdev "$(NET $P2 $P1)" -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:02 &
  wait
  rs=$(result "$WORK/server.log"); rcl=$(result "$WORK/client.log")
  echo "rxe-run: server exit $rs, client exit $rcl" >&2
  if [ "$rcl" != 0 ]; then rc=$rcl; else rc=$rs; fi
else
  boot "$WORK/console.log" "" "" -nic none
  rc=$(result "$WORK/console.log")
fi
T2=$(now)
awk -v a="$T0" -v b="$T1" -v c="$T2" -v s="$(du -h "$WORK/initramfs.cpio" | cut -f1)" 'BEGIN{
  printf "rxe-run: initramfs %s, prepare %.1fs, qemu %.1fs, total %.1fs\n", s, b-a, c-b, c-a}' >&2
case $rc in
  124) echo "rxe-run: TIMEOUT after ${TIMEOUT}s" >&2;;
  125) echo "rxe-run: guest ended without a test result" >&2;;
  *)   echo "rxe-run: test exit status $rc" >&2;;
esac
exit "$rc"
