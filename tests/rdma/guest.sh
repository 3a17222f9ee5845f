#!/bin/sh
# guest.sh - runs inside the Soft-RoCE guest (tests/rdma/run.sh puts it
# there with the binaries in /usr/bin): the transport conformance suite on
# rdma, then the oracle training test over rdma against a real coordinator
# and 2 shard servers, and weight readers relaying to each other by RDMA
# READ (test_train's test_relay_over_rdma); then, this kernel having TLS,
# the encrypted data plane's records in the kernel (test_dtls: against user
# space's; the conformance suite over encrypted tcp). The exit status is
# the number of failed parts.
export ZSHARD_BIN=/usr/bin ZSHARD_TEST_SERVERS=2 ZSHARD_TEST_CAPACITY=96M ZSHARD_KEEP_TEST_DIRS=1
ulimit -l unlimited
fails=0
echo "== rdma: transport conformance suite on $RXE_DEV"
test_transport --rdma || fails=$((fails + 1))
echo "== rdma: the oracle training test (2 trainers, 2 servers, stage 3); readers relaying"
test_train '*rdma*' >/tmp/train.log 2>&1 || fails=$((fails + 1))
cat /tmp/train.log
if ! grep -q '^\[  PASSED  \] 2 test' /tmp/train.log; then
	echo "the training test did not pass; the daemons' logs:"
	for f in /tmp/zshard-train-*/*.log; do
		[ -f "$f" ] && { echo "-- $f"; tail -20 "$f"; }
	done
	fails=$((fails + 1))
fi
echo "== kernel TLS: the encrypted data plane's records made by this kernel"
test_dtls >/tmp/dtls.log 2>&1 || fails=$((fails + 1))
cat /tmp/dtls.log
if ! grep -q '^client end: kernel TLS' /tmp/dtls.log; then
	echo "kernel TLS was not used (the tls module did not load?)"
	fails=$((fails + 1))
fi
echo "== kernel TLS: the transport conformance suite over encrypted tcp"
test_transport --tls || fails=$((fails + 1))
exit $fails
