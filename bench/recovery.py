#!/usr/bin/env python3
"""recovery.py - what a lost process costs a training job, in wall time and
in steps computed again, measured on the fault matrix's cluster
(tests/faults/faults.py: 2 servers, 2 ranks of charlm, a checkpoint every
10 steps) against the same job without a fault, run just before:

  trainer       kill -9 of a trainer (restarted by the harness at once):
                seen by its servers, whose connections to it end (the
                harness's coordinator: --trainer-gone-ms 1500, lease 3 s);
                no rollback: its replacement redoes the lost rank's step
                (steps computed again by the other ranks: 0; the table's
                count is of the rollback's steps, none here)
  trainer-by-lease
                the same kill as the coordinator saw it before issue 32:
                by its lease alone (--trainer-gone-ms past the run), so
                the job rolls back to its last checkpoint (the cost the
                redo saves)
  server        kill -9 of a shard server: the rollback path (the job goes
                back to its last checkpoint)
  replicated    the same kill, the job keeping 2 copies of each shard: its
                replicas take over, no rollback
  replicated, clipping
                the same with a job that clips gradients (the promoted
                copies' norms complete the step the lost server left)
  coordinator   kill -9 of the one coordinator (LMDB), restarted at once
  leader        kill -9 of the leading coordinator of three on etcd
                (a standby takes over; the job clips, so every step's norm
                exchange needs a leader)
  etcd          kill -9 of etcd's raft leader under those coordinators

    bench/recovery.py [--trials N] [--seed S] [--only KIND,...]
                                                   (make bench runs it)

Prints a markdown table: per kind, the median extra wall time over the
fault-free run, the median steps computed again, the median takeover, and
whether every trial ended bitwise equal to the fault-free run.
"""
import argparse
import os
import random
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "faults"))
import etcd as etcd_cluster  # noqa: E402
import faults  # noqa: E402


def job(etcd, replicas=1, clip=False, lease_only=False):
    return argparse.Namespace(servers=2, ranks=2, steps=150, batch=32, every=10, etcd=etcd,
                              replicas=replicas, clip=clip, lease_only=lease_only)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default=None, help="these kinds alone (comma-separated)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    rows = []
    kinds = [("trainer", False, lambda: "rank-%d" % rng.randrange(2)),
             ("trainer-by-lease", False, lambda: "rank-%d" % rng.randrange(2)),
             ("server", False, lambda: "server-%d" % rng.randrange(2)),
             ("replicated", False, lambda: "server-%d" % rng.randrange(2)),
             ("replicated, clipping", False, lambda: "server-%d" % rng.randrange(2)),
             ("coordinator", False, lambda: "coordinator"),
             ("leader", True, lambda: "leader"),
             ("etcd", True, lambda: "etcd-0")]
    base = {}
    for kind, ha, victim in kinds:
        if a.only and kind not in a.only.split(","):
            continue
        if ha and etcd_cluster.reason():
            rows.append("| %s | skipped: %s | | | | | |" % (kind, etcd_cluster.reason()))
            continue
        K = 2 if kind.startswith("replicated") else 1
        clip = kind.endswith("clipping")
        lease = kind == "trainer-by-lease"
        if (ha, K, clip) not in base:
            b = faults.run_trial(job(ha, K, clip), None, 0, "baseline")
            if not b["ok"]:
                sys.exit("recovery: the fault-free run failed: %s" % b["why"])
            base[(ha, K, clip)] = b
        b = base[(ha, K, clip)]
        cost, again, takeover, rec, equal = [], [], [], [], True
        for t in range(a.trials):
            step = rng.randrange(15, 130)
            r = faults.run_trial(job(ha, K, clip, lease), victim(), step,
                                 "%s-%d" % (kind.replace(", ", "-").replace(" ", "-"), t))
            equal &= r["ok"] and r["digest"] == b["digest"]
            if not r["ok"]:
                print("recovery: %s trial %d failed: %s" % (kind, t, r["why"]), file=sys.stderr)
                continue
            cost.append(r["seconds"] - b["seconds"])
            back = r["rollback"].split()[0]
            again.append(r["kill_step"] - int(back) if back.isdigit() else 0)
            if r["takeover"] is not None:
                takeover.append(r["takeover"])
            if r["recovery"] is not None:
                rec.append(r["recovery"])
        med = lambda v, f: f % statistics.median(v) if v else "-"
        rows.append("| %s | %d | %s | %s | %s | %s | %s |" % (
            kind, len(cost), med(cost, "%+.1f s"), med(again, "%.0f"), med(rec, "%.1f s"),
            med(takeover, "%.1f s"), "yes" if equal and cost else "NO"))
    print("| lost | trials | extra wall time (median) | steps computed again (median) | "
          "from the fault to 3 steps past it (median) | takeover (median) | all bitwise equal |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)
    print()
    print("Fault-free run: %s (150 steps of charlm, batch 32, 2 servers, 2 ranks)." %
          ", ".join("%.1f s (%s%s%s)" % (b["seconds"], "on etcd with clipping" if ha else "LMDB",
                                         ", 2 copies of each shard" if K > 1 else "",
                                         ", clipping" if clip and not ha else "")
                    for (ha, K, clip), b in sorted(base.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
