"""reader_relay.py - one weight reader in a process of its own, for
test_reader.py's relay tests: opens JOB, relays at 127.0.0.1:0 (fanout F),
pins STEP, writes its relay address and id to OUT, then reads every tensor
with PAUSE seconds between them (a slow parent the test kills mid-relay).

  reader_relay.py COORDINATOR JOB STEP FANOUT PAUSE OUT
"""
import sys
import time

import zshard


def main():
    coord, job, step, fanout, pause, out = sys.argv[1:7]
    r = zshard.Reader(job, coordinator=coord)
    addr = r.relay("127.0.0.1:0", int(fanout))
    r.pin(int(step))
    with open(out + ".tmp", "w") as f:
        f.write("%s %d\n" % (addr, r.stats()["id"]))
    import os
    os.rename(out + ".tmp", out)
    for t in r.tensors:
        r.read(t.name)
        time.sleep(float(pause))
    time.sleep(600)  # the test kills it


if __name__ == "__main__":
    main()
