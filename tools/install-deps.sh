#!/bin/sh
# install-deps.sh - installs the Debian packages zshard's build and tests need,
# when any is missing. Called by the Makefile before the first build; cheap
# when everything is there. As root it runs apt-get; otherwise it prints the
# exact command and fails.
#
#   tools/install-deps.sh            what the build and the unit tests need
#   tools/install-deps.sh --tests    and what the rest of make check starts
#                                    (Prometheus, etcd, clang for the fuzzers, openssl)
#   tools/install-deps.sh --check    only report what is missing (exit 1 if any)
set -eu

PKGS="gcc make pkg-config libgrpc-dev libssl-dev libprotobuf-c-dev protobuf-c-compiler \
liblmdb-dev lmdb-utils libmicrohttpd-dev libcmocka-dev libjansson-dev libopenblas-dev python3 python3-numpy python3-venv \
libibverbs-dev ibverbs-providers"
# for the tests only, without what Debian recommends beside them (the
# prometheus package would bring node exporters): a real Prometheus server
# scrapes a local cluster (tests/integration/prometheus.sh); clang and its
# runtime build the libFuzzer targets (tests/fuzz/); openssl makes the TLS
# test's certificates; shellcheck checks the Slurm script; etcd-server is
# the etcd cluster the coordinators share in tests/integration/ha.sh and
# tests/faults/faults.py --etcd; man-db reads the manual pages the build
# makes (tests/lib/check-man.sh, check-install.sh); Slurm and munge run
# deploy/slurm/zshard.sbatch on a one-node cluster (tests/deploy/slurm.sh)
TEST_PKGS="prometheus clang-14 libclang-rt-14-dev openssl shellcheck etcd-server man-db \
slurmctld slurmd slurm-client munge"

tests=false check=false
for a in "$@"; do
	case $a in
	--tests) tests=true ;;
	--check) check=true ;;
	*) echo "install-deps.sh: unknown option $a" >&2; exit 2 ;;
	esac
done
$tests || $check || TEST_PKGS=""
missing="" missing_test=""
for p in $PKGS $TEST_PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		case " $TEST_PKGS " in
		*" $p "*) missing_test="$missing_test $p" ;;
		*) missing="$missing $p" ;;
		esac
	fi
done
[ -z "$missing$missing_test" ] && exit 0

if $check; then
	echo "missing Debian packages:$missing$missing_test"
	exit 1
fi

opts="-y -o DPkg::Lock::Timeout=300"
if [ "$(id -u)" != 0 ]; then
	echo "zshard: missing Debian packages:$missing$missing_test" >&2
	echo "zshard: run as root:  apt-get update${missing:+ && apt-get install $opts$missing}${missing_test:+ && apt-get install $opts --no-install-recommends$missing_test}" >&2
	exit 1
fi
echo "zshard: installing$missing$missing_test"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
[ -z "$missing" ] || apt-get install -q $opts $missing >/dev/null
# shellcheck disable=SC2086
[ -z "$missing_test" ] || apt-get install -q $opts --no-install-recommends $missing_test >/dev/null
# the tests start their own Prometheus: the system service the package
# enabled just now (where systemd runs) is not wanted
case "$missing_test" in
*prometheus*)
	if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled --quiet prometheus 2>/dev/null; then
		systemctl disable --now prometheus >/dev/null 2>&1 &&
			echo "zshard: prometheus installed for the tests; its system service is disabled"
	fi
	;;
esac
# the same for Slurm's and munge's services: the Slurm test starts its own
for svc in slurmctld slurmd munge; do
	case " $missing_test " in
	*" $svc "*)
		if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled --quiet "$svc" 2>/dev/null; then
			systemctl disable --now "$svc" >/dev/null 2>&1 &&
				echo "zshard: $svc installed for the tests; its system service is disabled"
		fi
		;;
	esac
done
echo "zshard: packages installed"
