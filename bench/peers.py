#!/usr/bin/env python3
"""peers.py - the same training through zshard and through the systems
users run today, side by side: examples/gpt.py's GPT (4 blocks, d 256,
4 heads, byte vocabulary, tied head), batch 8 per rank, sequence 128,
AdamW (two groups, betas 0.9/0.95), 2 ranks on this machine, gloo,
OMP_NUM_THREADS=1 and one torch thread per rank.

    peers.py [--steps N] [--warmup W] [--runs K] [--only NAME,...] OUT.dat

Configurations: zshard at stages 1, 2, 3 over tcp and shm (a coordinator and
2 shard servers on loopback, started here); PyTorch FSDP2 (fully_shard per
block and the root; reshard_after_forward True and False; CPUOffloadPolicy);
DDP (fused AdamW); DeepSpeed ZeRO stages 1, 2, 3 (torch's AdamW) and ZeRO-3
with the optimizer offloaded to DeepSpeedCPUAdam. Each rank times every step
(forward to the optimizer's step) after W warm-up steps; the table gives the
median over ranks and runs of the per-run medians, tokens/s over both ranks,
and each rank's peak RSS (zshard: also its servers' peak RSS). Prints the
table (markdown) and writes OUT.dat (median ms per configuration) to plot.

A rank runs as `peers.py --rank-of NAME ...` (internal).
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "python"))

B, SEQ, D, LAYERS, HEADS = 8, 128, 256, 4, 4
LR, WD = 3e-3, 0.1

CONFIGS = [
    ("zshard ZeRO-3 tcp", "zshard", {"stage": 3, "transport": "tcp"}),
    ("zshard ZeRO-3 shm", "zshard", {"stage": 3, "transport": "shm"}),
    ("zshard ZeRO-2 shm", "zshard", {"stage": 2, "transport": "shm"}),
    ("zshard ZeRO-1 shm", "zshard", {"stage": 1, "transport": "shm"}),
    ("zshard ZeRO-2 tcp", "zshard", {"stage": 2, "transport": "tcp"}),
    ("zshard ZeRO-1 tcp", "zshard", {"stage": 1, "transport": "tcp"}),
    ("FSDP2 reshard_after_forward=True", "fsdp2", {"reshard": True}),
    ("FSDP2 reshard_after_forward=False", "fsdp2", {"reshard": False}),
    ("FSDP2 CPUOffloadPolicy", "fsdp2", {"reshard": True, "offload": True}),
    # torch.compile of each block (module.compile(), inductor), as FSDP2 users do
    ("zshard ZeRO-3 shm, torch.compile", "zshard", {"stage": 3, "transport": "shm",
                                                     "compile": True}),
    ("FSDP2 reshard_after_forward=True, torch.compile", "fsdp2", {"reshard": True,
                                                                  "compile": True}),
    ("DDP", "ddp", {}),
    ("DeepSpeed ZeRO-1", "deepspeed", {"stage": 1}),
    ("DeepSpeed ZeRO-2", "deepspeed", {"stage": 2}),
    ("DeepSpeed ZeRO-3", "deepspeed", {"stage": 3}),
    ("DeepSpeed ZeRO-3 offload optimizer (DeepSpeedCPUAdam)", "deepspeed",
     {"stage": 3, "offload": True}),
]


# ------------------------------------------------------------- one rank
def rank_main(a):
    import torch
    torch.set_num_threads(1)
    import gpt
    cfg = json.loads(a.cfg)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(1234)
    model = gpt.GPT(d=D, layers=LAYERS, heads=HEADS, seq=SEQ)
    decay, no_decay = gpt.param_groups(model)
    groups = [{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}]
    data = gpt.load_text()
    if a.kind == "zshard":
        from zshard.torch import AdamW, fully_shard
        for blk in model.blocks:
            fully_shard(blk)
            if cfg.get("compile"):
                blk.compile()
        fully_shard(model, job=a.job, stage=cfg["stage"], transport=cfg["transport"])
        opt = AdamW(groups, lr=LR, betas=(0.9, 0.95), eps=1e-8)
        model.zshard_start()

        def step_fn(x, y):
            loss = model(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
    else:
        import torch.distributed as dist
        if a.kind == "deepspeed":
            import deepspeed
            deepspeed.init_distributed(dist_backend="gloo")
            # gradient_clipping: DeepSpeed clips at 1.0 unless told; no one else does here
            conf = {"train_micro_batch_size_per_gpu": B, "gradient_accumulation_steps": 1,
                    "gradient_clipping": 0.0,
                    "optimizer": {"type": "AdamW", "params": {
                        "lr": LR, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": WD}},
                    "zero_optimization": {"stage": cfg["stage"]}}
            if cfg.get("offload"):
                conf["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
            else:
                conf["zero_force_ds_cpu_optimizer"] = False
            engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=groups,
                                                   config=conf)

            def step_fn(x, y):
                loss = engine(x, y)
                engine.backward(loss)
                engine.step()
                return loss
        else:
            dist.init_process_group("gloo")
            if a.kind == "ddp":
                from torch.nn.parallel import DistributedDataParallel
                model = DistributedDataParallel(model)
                opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.95), eps=1e-8, fused=True)
            else:
                from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
                kw = {"reshard_after_forward": cfg["reshard"]}
                if cfg.get("offload"):
                    kw["offload_policy"] = CPUOffloadPolicy(pin_memory=False)
                for blk in model.blocks:
                    fully_shard(blk, **kw)
                    if cfg.get("compile"):
                        blk.compile()
                fully_shard(model, **kw)
                decay, no_decay = gpt.param_groups(model)
                opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                                         {"params": no_decay, "weight_decay": 0.0}],
                                        lr=LR, betas=(0.9, 0.95), eps=1e-8)

            def step_fn(x, y):
                loss = model(x, y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                return loss
    times, split, loss = [], [], None
    for step in range(a.warmup + a.steps):
        x, y = gpt.batch(data, 1234, rank, step, B, SEQ)
        t0 = time.perf_counter()
        loss = step_fn(x, y)
        dt = time.perf_counter() - t0
        if step >= a.warmup:
            times.append(dt)
            if a.kind == "zshard":  # where the time goes: the step driver's report
                s = model.zshard_trainer.last_step()
                split.append([s["gather_wait_seconds"], s["push_wait_seconds"],
                              s["control_seconds"]])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("RESULT " + json.dumps({"rank": rank, "median_s": statistics.median(times),
                                  "rss": rss, "loss": float(loss), "world": world,
                                  "split": [statistics.median(c) for c in zip(*split)]
                                  if split else None}), flush=True)
    if a.kind == "zshard":
        model.zshard_close()
    elif a.kind != "deepspeed":
        import torch.distributed as dist
        dist.destroy_process_group()


# ------------------------------------------------------------- the launcher
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_pids(d):
    """The shard servers' pids, from the launcher's pid files."""
    run = os.path.join(d, "run")
    out = []
    for f in sorted(os.listdir(run)) if os.path.isdir(run) else []:
        if f.startswith("server"):
            with open(os.path.join(run, f)) as pf:
                out.append(int(pf.read().split()[0]))
    return out


def server_peaks(d, reset=False):
    """The shard servers' peak RSS (VmHWM), bytes, since the last reset;
    reset: start the peak afresh (clear_refs 5), for the next configuration."""
    out = []
    for pid in server_pids(d):
        try:
            if reset:
                with open("/proc/%d/clear_refs" % pid, "w") as f:
                    f.write("5")
                continue
            with open("/proc/%d/status" % pid) as f:
                out += [int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM:")]
        except OSError:
            pass
    return out


def run_config(name, kind, cfg, a, cluster, run):
    env = dict(os.environ, WORLD_SIZE="2", OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), DS_ACCELERATOR="cpu")
    env.pop("LD_LIBRARY_PATH", None)
    job = "peers-%d-%d" % (run, abs(hash(name)) % 100000)
    if kind == "zshard":
        env["ZSHARD_COORDINATOR"] = cluster
    procs = []
    for r in range(2):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--rank-of", kind, "--cfg",
             json.dumps(cfg), "--job", job, "--steps", str(a.steps), "--warmup",
             str(a.warmup), "x"], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    res, logs = [], []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        logs.append(out)
        for ln in out.splitlines():
            if ln.startswith("RESULT "):
                res.append(json.loads(ln[7:]))
    if kind == "zshard":  # its servers let the job go
        subprocess.run([os.path.join(ROOT, "build", "bin", "zshardctl"), "--coordinator",
                        cluster, "job", "delete", job], capture_output=True)
    if len(res) != 2:
        tail = " / ".join(x.strip().splitlines()[-1] if x.strip() else "" for x in logs)
        return None, tail[-300:]
    return res, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank-of", default=None)
    ap.add_argument("--cfg", default="{}")
    ap.add_argument("--job", default="peers")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("out")
    a = ap.parse_args()
    if a.rank_of:
        a.kind = a.rank_of
        return rank_main(a)
    launcher = os.path.join(ROOT, "deploy", "local", "zshard-local")
    import tempfile
    d = tempfile.mkdtemp(prefix="zshard-peers-")
    cluster = subprocess.run([launcher, "start", "--servers", "2", "--dir", d],
                             capture_output=True, text=True, check=True).stdout.strip()
    chosen = [c for c in CONFIGS if not a.only or any(o in c[0] for o in a.only.split(","))]
    got = {name: [] for name, _, _ in chosen}
    why = {}
    try:
        # round-robin: each run goes through every configuration in turn, so
        # the machine's drift (it is shared) falls on all of them alike
        for run in range(a.runs):
            for name, kind, cfg in chosen:
                if name in why:
                    continue
                if kind == "zshard":
                    server_peaks(d, reset=True)
                res, err = run_config(name, kind, cfg, a, cluster, run)
                if res is None:
                    why[name] = err
                    print("| %s | failed: %s |" % (name, err), flush=True)
                    continue
                srv = server_peaks(d) if kind == "zshard" else []
                got[name].append((res, srv))
                print("| %s | %.1f ms |" % (name, statistics.median(
                    x["median_s"] for x in res) * 1e3), flush=True)
        rows = []
        for name, kind, _ in chosen:
            if name in why or not got[name]:
                rows.append((name, None, why.get(name, "no run")))
                continue
            res = [x for r, _ in got[name] for x in r]
            meds = [x["median_s"] for x in res]
            splits = [x["split"] for x in res if x.get("split")]
            srv = [m for _, s in got[name] for m in s]
            med = statistics.median(meds)
            rows.append((name, (med, min(meds), max(meds), 2 * B * SEQ / med,
                                max(x["rss"] for x in res), max(srv) if srv else 0,
                                statistics.mean(x["loss"] for x in res),
                                [statistics.median(c) for c in zip(*splits)] if splits
                                else None), None))
    finally:
        subprocess.run([launcher, "stop", "--dir", d], capture_output=True)
        subprocess.run(["rm", "-rf", d])
    write(a, rows)


def write(a, rows):
    import io
    fsdp = [r for r in rows if r[0] == "FSDP2 reshard_after_forward=True" and r[1]]
    # compiled against compiled: each side's blocks through torch.compile
    fsdpc = [r for r in rows if r[0] == "FSDP2 reshard_after_forward=True, torch.compile"
             and r[1]]
    dsz3 = [r for r in rows if r[0].startswith("DeepSpeed ZeRO-3") and r[1]]
    f = io.StringIO()
    with open(a.out, "w") as dat:
        f.write("| configuration | median step ms | spread (min-max over ranks and runs) | "
                "tokens/s (2 ranks) | peak RSS per rank MB | servers' peak RSS MB | "
                "final loss |\n|---|---|---|---|---|---|---|\n")
        for name, v, why in rows:
            if v is None:
                f.write("| %s | failed: %s | | | | | |\n" % (name, why))
                continue
            med, lo, hi, tps, rss, srv, loss, _ = v
            f.write("| %s | %.1f | %.1f-%.1f | %.0f | %.0f | %s | %.3f |\n" % (
                name, med * 1e3, lo * 1e3, hi * 1e3, tps, rss / 1e6,
                "%.0f" % (srv / 1e6) if srv else "-", loss))
            dat.write('"%s" %.2f\n' % (name.replace('"', "'"), med * 1e3))
        f.write("\n| zshard ZeRO-3 against | its step ms | zshard's ms | ratio | goal |\n"
                "|---|---|---|---|---|\n")
        for z in (r for r in rows if r[0].startswith("zshard ZeRO-3") and r[1]):
            compiled = z[0].endswith("torch.compile")
            base = fsdpc if compiled else fsdp
            for peer, goal in [(base[0], "<= 0.80") if base else (None, "")] + [
                    (r, "<= 1.00") for r in dsz3]:
                if peer is None:
                    continue
                f.write("| %s vs %s | %.1f | %.1f | %.2f | %s |\n" % (
                    z[0], peer[0], peer[1][0] * 1e3, z[1][0] * 1e3, z[1][0] / peer[1][0],
                    goal))
        f.write("\n| zshard: where the step goes | step ms | waiting for parameters | "
                "waiting for pushes | coordinator at the boundary | the trainer's compute |\n"
                "|---|---|---|---|---|---|\n")
        for name, v, _ in rows:
            if v is None or not v[7]:
                continue
            g, p, c = (x * 1e3 for x in v[7])
            f.write("| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n" % (
                name, v[0] * 1e3, g, p, c, v[0] * 1e3 - g - p - c))
        f.write("\n(%d steps after %d warm-up per run, %d runs, 2 ranks; batch %d x %d tokens "
                "per rank; GPT d %d, %d blocks, %d heads; zshard's 2 shard servers run on the "
                "same 2 cores as its trainers)\n" % (a.steps, a.warmup, a.runs, B, SEQ, D,
                                                      LAYERS, HEADS))
    print(f.getvalue())


if __name__ == "__main__":
    sys.exit(main())
