"""torch.distributed.checkpoint (DCP) for zshard jobs: what FSDP2 users save
and load.

  python -m zshard.dcp export JOB DIR [--coordinator HOST:PORT]

writes the job's parameters and AdamW state (from the servers, through
zshardctl export --optimizer) as a DCP checkpoint of the layout
torch.distributed.checkpoint.state_dict.get_state_dict gives: {"model":
{fqn: tensor}, "optim": {"state": {fqn: {"step", "exp_avg", "exp_avg_sq"}},
"param_groups": [...]}}, which an FSDP2 model at any world size loads with
dcp.load and set_state_dict. zshard.torch.load_dcp(model, DIR) goes the
other way for the parameters: an FSDP2 checkpoint's "model" into a module
before its job starts (rank 0 uploads them; optimizer state starts anew).
"""
import argparse
import os
import subprocess
import sys
import tempfile


def _zshardctl():
    from zshard._cli import bindir
    path = os.path.join(bindir(), "zshardctl")
    return path if os.access(path, os.X_OK) else "zshardctl"


def export_state_dict(job, coordinator=None, groups=None):
    """The job's state as get_state_dict lays it out (plain CPU tensors):
    (model, optim), and the step. groups: the param_groups to record
    (default: one naming every parameter; a loader keeps its optimizer's
    own groups and hyperparameters, loading "optim"'s "state")."""
    import torch
    from safetensors import safe_open
    with tempfile.TemporaryDirectory(prefix="zshard-dcp-") as d:
        out = os.path.join(d, "state.safetensors")
        argv = [_zshardctl()] + (["--coordinator", coordinator] if coordinator else []) + [
            "export", job, "--out", out, "--optimizer", "--bare-names"]
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            raise RuntimeError("zshardctl export %s: %s" % (job, r.stdout.strip()))
        with safe_open(out, "pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    step = int(meta.get("step", "0"))
    suffixes = (".exp_avg_sq", ".exp_avg", ".momentum_buffer", ".sum")
    model, state = {}, {}
    for k, t in tensors.items():
        s = next((x for x in suffixes if k.endswith(x)), None)
        if s is None:
            model[k] = t
        else:
            state.setdefault(k[:-len(s)], {})[s[1:]] = t
    for fqn in state:
        state[fqn]["step"] = torch.tensor(float(step))
    if groups is None:  # loaders keep their own groups (set_state_dict with theirs)
        groups = [{"params": sorted(state) or sorted(model)}]
    return model, {"state": state, "param_groups": groups}, step


def export_dcp(job, checkpoint_id, coordinator=None, model_key="model", optim_key="optim"):
    """Writes job's state as a DCP checkpoint in checkpoint_id; returns the step."""
    import torch.distributed.checkpoint as dcp
    model, optim, step = export_state_dict(job, coordinator)
    dcp.save({model_key: model, optim_key: optim}, checkpoint_id=checkpoint_id, no_dist=True)
    return step


def load_model_dcp(module, checkpoint_id, model_key="model"):
    """An FSDP2 (or any DCP) checkpoint's parameters and buffers into
    module, in place, before its zshard job starts: full tensors however
    many ranks wrote it. Returns the keys loaded."""
    import torch.distributed.checkpoint as dcp
    sd = {k: v.detach().clone() for k, v in module.state_dict().items()}
    dcp.load({model_key: sd}, checkpoint_id=checkpoint_id, no_dist=True)
    module.load_state_dict(sd)
    return sorted(sd)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m zshard.dcp",
                                 description="a zshard job's state as a DCP checkpoint")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="JOB DIR: the job's parameters and optimizer state")
    e.add_argument("job")
    e.add_argument("dir")
    e.add_argument("--coordinator", default=None)
    a = ap.parse_args(argv)
    step = export_dcp(a.job, a.dir, a.coordinator)
    print("zshard.dcp: job %s at step %d written to %s" % (a.job, step, a.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
