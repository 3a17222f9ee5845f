"""torch.distributed.checkpoint (DCP) for zshard jobs: what FSDP2 users save
and load.

  python -m zshard.dcp export JOB DIR [--coordinator HOST:PORT]
  python -m zshard.dcp import JOB DIR [--coordinator HOST:PORT] [--no-optimizer]

export writes the job's parameters and optimizer state (from the servers,
through zshardctl export --optimizer) as a DCP checkpoint of the layout
torch.distributed.checkpoint.state_dict.get_state_dict gives: {"model":
{fqn: tensor}, "optim": {"state": {fqn: {"step", "exp_avg", "exp_avg_sq"}},
"param_groups": [...]}}, which an FSDP2 model at any world size loads with
dcp.load and set_state_dict. import reads such a checkpoint into a new
job (zshardctl import --optimizer; the job created with the state's step
as its optimizer's "steps_taken"). zshard.torch.load_dcp(model, DIR,
optimizer=opt) goes the other way: an FSDP2 checkpoint's "model" into a
module before its job starts, and its "optim" state into the job (created
with the state's step taken; rank 0 uploads parameters, then state).
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
    (default: the job's, torch_groups; the usual dcp.load of {"model":
    msd, "optim": osd} from get_state_dict finds every key it asks for, and
    set_state_dict sets the loader's groups to the job's values)."""
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
    # the optimizer's own count: an imported state's steps come first
    osteps = int(meta.get("optimizer_steps", meta.get("step", "0")))
    suffixes = (".exp_avg_sq", ".exp_avg", ".momentum_buffer", ".sum")
    model, state = {}, {}
    for k, t in tensors.items():
        s = next((x for x in suffixes if k.endswith(x)), None)
        if s is None:
            model[k] = t
        else:
            state.setdefault(k[:-len(s)], {})[s[1:]] = t
    for fqn in state:
        state[fqn]["step"] = torch.tensor(float(osteps))
    if groups is None:
        groups = torch_groups(meta.get("optimizer"), meta.get("optimizer_groups"), model)
    return model, {"state": state, "param_groups": groups}, step


# the torch optimizer each of zshard's optimizers is the update of
_TORCH_OPTIM = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD", "adagrad": "Adagrad"}


def torch_groups(kind, groups_json, model):
    """The job's optimizer groups as a torch optimizer of its kind keeps
    them in get_state_dict's layout: every key that optimizer's groups have
    (so that dcp.load into an FSDP2 model's get_state_dict finds each), its
    defaults where zshard has no value, the job's values (as its spec
    created them: a scheduler's later values are the trainers', in its own
    state) and "params", the parameters' names."""
    import json

    import torch
    if not groups_json or kind not in _TORCH_OPTIM:
        return [{"params": sorted(model)}]
    cls = getattr(torch.optim, _TORCH_OPTIM[kind])
    out = []
    for g in json.loads(groups_json):
        v = {"lr": g["lr"], "weight_decay": g["weight_decay"]}
        if kind in ("adamw", "adam"):
            v.update(betas=(g["beta1"], g["beta2"]), eps=g["eps"])
        elif kind == "adagrad":
            v["eps"] = g["eps"]
        else:
            v["momentum"] = g["momentum"]
        group = dict(cls([torch.nn.Parameter(torch.zeros(1))], **v).param_groups[0])
        group["params"] = list(g["params"])
        out.append(group)
    return out


def export_dcp(job, checkpoint_id, coordinator=None, model_key="model", optim_key="optim"):
    """Writes job's state as a DCP checkpoint in checkpoint_id; returns the step."""
    import torch.distributed.checkpoint as dcp
    model, optim, step = export_state_dict(job, coordinator)
    dcp.save({model_key: model, optim_key: optim}, checkpoint_id=checkpoint_id, no_dist=True)
    return step


def load_model_dcp(module, checkpoint_id, model_key="model", optimizer=None, optim_key="optim"):
    """An FSDP2 (or any DCP) checkpoint's parameters and buffers into
    module, in place, before its zshard job starts: full tensors however
    many ranks wrote it. With optimizer (a zshard.torch optimizer over
    module's parameters), the checkpoint's optimizer state too (what
    get_state_dict put under optim_key: AdamW's and Adam's exp_avg,
    exp_avg_sq and step, SGD's momentum_buffer, Adagrad's sum and step):
    the job is created with its step taken and rank 0 uploads the state
    after the parameters, so the next update is the one FSDP2's would have
    been. Returns the keys loaded."""
    import torch.distributed.checkpoint as dcp
    sd = {k: v.detach().clone() for k, v in module.state_dict().items()}
    dcp.load({model_key: sd}, checkpoint_id=checkpoint_id, no_dist=True)
    if optimizer is not None:
        step, state = _load_optim_state(module, checkpoint_id, optimizer, optim_key)
    module.load_state_dict(sd)
    if optimizer is not None:
        optimizer._zs.import_state(step, state)
    return sorted(sd)


def _load_optim_state(module, checkpoint_id, optimizer, optim_key):
    """The checkpoint's optimizer state of module's trained parameters:
    (the step, {parameter: {key: full tensor}})."""
    import torch
    import torch.distributed.checkpoint as dcp
    from zshard.errors import InvalidArgument
    from zshard.torch.job import STATE_KEYS
    kind = getattr(optimizer, "_KIND", None)
    if kind not in STATE_KEYS or getattr(optimizer, "_zs", None) is None:
        raise InvalidArgument("optimizer= takes a zshard.torch optimizer (AdamW, Adam, SGD, "
                              "Adagrad) over the module's parameters, not %s"
                              % type(optimizer).__name__)
    if kind == "sgd" and not any(g.get("momentum", 0.0) for g in optimizer.param_groups):
        raise InvalidArgument("SGD without momentum keeps no optimizer state to load")
    keys = STATE_KEYS[kind]
    stepped = kind != "sgd"  # torch's SGD keeps no step
    template = {}
    for n, p in module.named_parameters():
        if p.requires_grad:
            t = {k: torch.empty(p.shape, dtype=p.dtype) for k in keys}
            if stepped:
                t["step"] = torch.tensor(0.0)
            template[n] = (p, t)
    try:
        dcp.load({optim_key: {"state": {n: t for n, (_, t) in template.items()}}},
                 checkpoint_id=checkpoint_id, no_dist=True)
    except Exception as e:  # DCP names the key it lacks
        raise InvalidArgument("%s holds no %s state of this model under '%s' (%s): a "
                              "checkpoint of another optimizer or model?"
                              % (checkpoint_id, kind, optim_key, str(e).splitlines()[0][:300]))
    steps = {float(t["step"]) for _, t in template.values()} if stepped else {1.0}
    if len(steps) != 1:
        raise InvalidArgument("%s: the parameters' optimizer states are at different steps "
                              "(%s): zshard steps them together" %
                              (checkpoint_id, ", ".join("%g" % s for s in sorted(steps))))
    step = steps.pop()
    if step < 1 or step != int(step):
        raise InvalidArgument("%s: the optimizer state's step is %g, not a count of steps "
                              "taken" % (checkpoint_id, step))
    return int(step), {id(p): {k: t[k] for k in keys} for p, t in template.values()}


def import_dcp(job, checkpoint_id, coordinator=None, model_key="model", optim_key="optim",
               optimizer=True):
    """A DCP checkpoint (FSDP2's get_state_dict layout) into job, which has
    not trained: its "model" as the parameters and, with optimizer, its
    "optim" state (exp_avg and exp_avg_sq, momentum_buffer or sum; the
    job must have been created with the state's step as its optimizer's
    "steps_taken"), through zshardctl import. Returns the state's step (0
    without optimizer)."""
    import torch
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import save_file
    md = dcp.FileSystemReader(checkpoint_id).read_metadata().state_dict_metadata
    model, state, steps = {}, {}, set()
    keys = ("exp_avg_sq", "exp_avg", "momentum_buffer", "sum", "step")
    pre, spre = model_key + ".", optim_key + ".state."
    for k, m in md.items():
        if not hasattr(m, "size"):
            continue  # not a tensor (param_groups' values)
        t = torch.empty(tuple(m.size), dtype=m.properties.dtype)
        if k.startswith(spre) and optimizer:
            fqn, _, key = k[len(spre):].rpartition(".")
            if key in keys and fqn:
                state.setdefault(fqn, {})[key] = t
        elif k.startswith(pre):
            model[k[len(pre):]] = t
    if not model:
        raise ValueError("%s holds no tensors under '%s'" % (checkpoint_id, model_key))
    if optimizer and not state:
        raise ValueError("%s holds no optimizer state under '%s' (import the parameters alone "
                         "with optimizer=False)" % (checkpoint_id, optim_key))
    dcp.load({model_key: model, optim_key: {"state": state}} if state else {model_key: model},
             checkpoint_id=checkpoint_id, no_dist=True)
    flat = {n: t.float().contiguous() for n, t in model.items()}
    for fqn, st in state.items():
        if "step" in st:
            steps.add(float(st.pop("step")))
        for key, t in st.items():
            flat["%s.%s" % (fqn, key)] = t.float().contiguous()
    if state and not steps:
        steps.add(1.0)  # torch's SGD keeps no step: a momentum buffer is past step 1
    if len(steps) > 1:
        raise ValueError("%s: the parameters' optimizer states are at different steps (%s)"
                         % (checkpoint_id, ", ".join("%g" % s for s in sorted(steps))))
    step = int(steps.pop()) if steps else 0
    with tempfile.TemporaryDirectory(prefix="zshard-dcp-") as d:
        path = os.path.join(d, "state.safetensors")
        save_file(flat, path, metadata={"format": "zshard", "optimizer_steps": str(step)})
        argv = [_zshardctl()] + (["--coordinator", coordinator] if coordinator else []) + [
            "import", job, path] + (["--optimizer"] if state else [])
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            raise RuntimeError("zshardctl import %s: %s" % (job, r.stdout.strip()))
    return step


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m zshard.dcp",
                                 description="a zshard job's state as a DCP checkpoint, and back")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="JOB DIR: the job's parameters and optimizer state")
    e.add_argument("job")
    e.add_argument("dir")
    e.add_argument("--coordinator", default=None)
    i = sub.add_parser("import", help="JOB DIR: a DCP checkpoint (FSDP2's) into a new job: "
                                      "its parameters and optimizer state (the job created "
                                      "with the state's step as its optimizer's steps_taken)")
    i.add_argument("job")
    i.add_argument("dir")
    i.add_argument("--coordinator", default=None)
    i.add_argument("--no-optimizer", action="store_true",
                   help="the parameters alone (the optimizer starts anew)")
    a = ap.parse_args(argv)
    if a.cmd == "import":
        try:
            step = import_dcp(a.job, a.dir, a.coordinator, optimizer=not a.no_optimizer)
        except (ValueError, RuntimeError) as err:
            print("zshard.dcp: %s" % err, file=sys.stderr)
            return 1
        print("zshard.dcp: %s imported into job %s%s" % (
            a.dir, a.job, " with its optimizer state of step %d" % step if step else ""))
        return 0
    step = export_dcp(a.job, a.dir, a.coordinator)
    print("zshard.dcp: job %s at step %d written to %s" % (a.job, step, a.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
