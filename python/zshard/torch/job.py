"""The state behind a fully_shard'ed root: the job, its units, the binding
of parameters and gradients to libzshard's buffers, and the hooks that run
the gather -> compute -> free -> push flow (see zshard.torch)."""
import ctypes
import math
import sys
import time
import warnings

import numpy as np
import torch

import zshard
from zshard.errors import FailedPrecondition, InvalidArgument, NotFound, TimedOut
from zshard.torch.blob import MAGIC, frame, persistent_buffers, rng_blob, unframe
from zshard.torch import start as _start
from zshard.torch.grads import OnServers, mark

DT = {torch.float32: ("f32", np.float32, None), torch.bfloat16: ("bf16", np.uint16,
                                                                   torch.bfloat16),
       torch.float16: ("f16", np.float16, None)}



def clip_wire(max_norm):
    """max_grad_norm as the servers take it: inf (compute the norm, scale
    by exactly 1: what Hugging Face Trainer sets to log the norm without
    clipping) is the largest double, which no finite norm reaches."""
    return sys.float_info.max if math.isinf(max_norm) else max_norm

class _Unit:
    """One unit of the job: a module and the parameters it owns."""

    def __init__(self, index, name, module, params, reshard):
        self.index, self.name, self.module = index, name, module
        self.params = params          # [(qualified name, parameter)] in the job's order
        self.dtype = params[0][1].dtype if params else None  # one per unit
        self.family = [self]          # with the module's units of its other dtypes, which
                                      # the first's hooks act for (its companions)
        self.reshard = reshard
        self.ptr = None               # the bound parameter buffer, or None
        self.flat = None              # a tensor over it
        self.grad_ptr = None
        self.pinned = None            # CUDA: the unit's pinned staging buffer
        self.copied = None            # and the event of its last copy to the device
        self.grad_flat = None
        self.waiting = 0              # parameters whose gradient is still to come
        self.pushed = False
        self.offsets, self.shapes = [], []  # each parameter's place (its data may be empty)
        off = 0
        for _, p in params:
            self.offsets.append(off)
            self.shapes.append(tuple(p.shape))
            off += p.numel()
        self.numel = off


OWNER = {}  # id(parameter) -> the Job that trains it


class _DeviceMemory:
    """Device memory of libzshard's, as torch.as_tensor takes it (the CUDA
    array interface): the library owns it; the tensor keeps this alive."""

    def __init__(self, ptr, n, typestr):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr,
                                         "data": (ptr, False), "version": 2}


# torch's names of each optimizer's state arrays, in the servers' order
STATE_KEYS = {"adamw": ("exp_avg", "exp_avg_sq"), "adam": ("exp_avg", "exp_avg_sq"),
              "sgd": ("momentum_buffer",), "adagrad": ("sum",)}


class Job:
    """The root's state: the job, the units, the hooks."""

    def __init__(self, root, opts):
        self.root, self.o = root, opts
        self.units = []
        self.t = None
        self.opt = None
        self.step = 0
        self.in_step = False
        self.backward_started = False
        self.sync = True
        self.accum = False             # gradients held for a later push
        self.sent = None               # the hyperparameters last sent
        self.by_ptr = {}               # buffer address -> unit, for the saved-tensor hooks
        self.resume_state = None
        self.imported = None           # an optimizer state to upload: (step, {id(p): {key: t}})
        self.started = False
        self._sth = None
        self.eval_units = set()
        self.init_flats = None
        self.norms = {}                # step -> its global gradient norm (servers')

    # ---------------------------------------------------------- structure
    def collect(self):
        """Units: the root's own parameters first (unit 0), then each
        fully_shard'ed submodule in module order, a nested unit's parameters
        its own (not its parent's). A parameter that a unit shares with a
        module outside it (a tied embedding and output head) belongs to the
        root, which stays gathered through the step."""
        marked = [(n, m) for n, m in self.root.named_modules()
                  if m is not self.root and getattr(m, "_zshard_unit", None) is not None]
        names = {id(p): n for n, p in self.root.named_parameters()}
        claim = {}  # id(p) -> the innermost unit holding it
        for n, m in sorted(marked, key=lambda nm: -nm[0].count(".")):
            for p in m.parameters():
                claim.setdefault(id(p), n)
        shared = set()
        for n, m in marked:
            for p in m.parameters():
                c = claim[id(p)]
                if c != n and not c.startswith(n + "."):
                    shared.add(id(p))  # used by n, claimed by a unit outside it
        for n, p in self.root.named_parameters():
            c = claim.get(id(p))
            if c is not None and n != c and not n.startswith(c + "."):
                shared.add(id(p))  # the root's own modules use it too
        per = {n: [] for n, _ in marked}
        root_ps = []
        for p in self.root.parameters():
            c = claim.get(id(p))
            if c is None or id(p) in shared:
                root_ps.append((names[id(p)], p))
            else:
                per[c].append((names[id(p)], p))
        # one unit per module and dtype: a module with parameters of several
        # dtypes (fp32 norms beside bf16 weights) is the unit of its first
        # parameter's dtype and companions right after it, each a unit of
        # the job in its own dtype (the hooks treat them as one)
        def add(name, module, ps, reshard):
            first = None
            for dt in list(dict.fromkeys(p.dtype for _, p in ps)) or [None]:
                u = _Unit(len(self.units), name if first is None else "%s[%s]" % (
                    name, DT.get(dt, (str(dt),))[0]), module,
                    [(n, p) for n, p in ps if p.dtype == dt], reshard)
                self.units.append(u)
                if first is None:
                    first = u
                else:
                    first.family.append(u)

        add("root", self.root, root_ps, False)
        for n, m in marked:  # module order
            add(n, m, per[n], m._zshard_unit)
        # a module with no parameters of its own (a root whose every
        # parameter a unit claims, a container of units: FSDP2 takes both)
        # is no unit of the job; the root's hooks still begin each step
        self.root_unit = self.units[0]
        if not self.root_unit.params:
            self.root_unit.family = []
        self.units = [u for u in self.units if u.params]
        if not self.units:
            raise InvalidArgument("the model has no parameters: nothing to train")
        for i, u in enumerate(self.units):
            u.index = i
        self.slot = {}
        for u in self.units:
            for (_, p), off in zip(u.params, u.offsets):
                self.slot[id(p)] = (u, off)
                OWNER[id(p)] = self
        dts = {p.dtype for u in self.units for _, p in u.params}
        if not dts <= set(DT):
            raise InvalidArgument("parameters must be float32, bfloat16 or float16 (found %s)"
                                  % ", ".join(sorted(map(str, dts - set(DT)))))
        self.dtype = self.units[0].dtype  # the job's compute dtype: the root's first (or the
                                          # first unit's, where the root has none)
        devs = {p.device for u in self.units for _, p in u.params}
        if len(devs) != 1:
            raise InvalidArgument("the parameters are on several devices: %s" %
                                  ", ".join(sorted(map(str, devs))))
        dev = next(iter(devs))
        # CUDA parameters are libzshard's device buffers (its device mode:
        # gathers staged and copied on its stream), CPU ones its host
        # buffers (or, device="emulated", its emulated device's); staged:
        # copies of their own, staged here through those buffers
        mode = self.o.get("device")
        if mode not in (None, "emulated"):
            raise InvalidArgument("device=%r: None (the parameters' device) or 'emulated'" %
                                  (mode,))
        if mode == "emulated" and (dev.type != "cpu" or self.o.get("staged")):
            raise InvalidArgument("device='emulated' is for CPU parameters, not staged")
        self.devmode = None  # what zs_trainer_set_device gets: None, a device, "emulated"
        if dev.type == "cuda" and not self.o.get("staged"):
            self.devmode = dev
        elif mode == "emulated":
            self.devmode = "emulated"
        if self.o.get("collective") and self.devmode is None:
            raise InvalidArgument("collective=True: the trainers reduce among themselves in "
                                  "libzshard's device mode: CUDA parameters (not staged), or "
                                  "device='emulated'")
        staged = self.o.get("staged") or (dev.type != "cpu" and self.devmode is None)
        self.device = dev if staged else None
        self.pdev = dev  # where the parameters live
        self.empty = {dt: torch.empty(0, dtype=dt, device=dev) for dt in dts}

    def attach(self, opt, seen):
        missing = [n for u in self.units for n, p in u.params
                   if id(p) not in seen and p.requires_grad]
        if missing:
            raise InvalidArgument("parameters the optimizer does not train: %s (frozen "
                                  "parameters: requires_grad=False)" % ", ".join(missing[:8]))
        self.opt = opt

    def spec(self):
        opt = self.opt
        group_of = {}
        for gi, g in enumerate(opt.param_groups):
            for p in g["params"]:
                group_of[id(p)] = gi
        h = opt.zshard_hparams()
        optimizer = {"kind": opt._KIND, "lr": h[0]["lr"], "weight_decay": h[0]["weight_decay"],
                     "groups": [_group_json(opt._KIND, g) for g in h]}
        if opt._KIND in ("adamw", "adam"):
            optimizer.update(beta1=h[0]["beta1"], beta2=h[0]["beta2"], eps=h[0]["eps"])
        elif opt._KIND == "adagrad":
            optimizer["eps"] = h[0]["eps"]
        else:
            optimizer["momentum"] = h[0]["momentum"]
        if opt.max_grad_norm:
            optimizer["clip_norm"] = clip_wire(opt.max_grad_norm)
        if self.imported is not None:  # the next update is the state's step + 1
            optimizer["steps_taken"] = self.imported[0]
        names = {}  # id(p) -> every state_dict name of it (a tied parameter has several)
        for n, p in self.root.named_parameters(remove_duplicate=False):
            names.setdefault(id(p), []).append(n)
        units = []
        for u in self.units:
            tensors = []
            for (n, p), shape in zip(u.params, u.shapes):
                t = {"name": n, "shape": list(shape)}
                others = [a for a in names[id(p)] if a != n]
                if others:  # an export by bare names writes it under each
                    t["aliases"] = others
                if group_of.get(id(p), 0):
                    t["group"] = group_of[id(p)]
                if not p.requires_grad:  # held and gathered, never updated
                    t["frozen"] = True
                tensors.append(t)
            units.append({"name": u.name, "dtype": DT[u.dtype][0], "tensors": tensors})
        spec = {"name": self.o["job"], "stage": self.o["stage"],
                "world_size": self.o["world_size"], "compute_dtype": DT[self.dtype][0],
                "optimizer": optimizer, "units": units}
        nbuf = len(persistent_buffers(self.root))
        if nbuf:  # an export of a step with none recorded says they are missing
            spec["buffers"] = nbuf
        if self.o.get("checkpoint_every"):
            spec["checkpoint_every"] = self.o["checkpoint_every"]
        if self.o.get("collective"):
            spec["collective"] = "nccl"
        if self.o.get("data_tls"):
            spec["data_tls"] = True
        if self.o.get("readers"):
            spec["readers"] = {"pins": self.o["readers"]}
        return spec

    # ------------------------------------------------------------- start
    def start(self):
        """Creates (rank 0) or joins the job and says where this rank
        starts (start.py: the fully_shard resume= choice)."""
        if self.started:
            return self.resume_state
        state = _start.start(self)
        self.started = True
        return state

    def frozen_now(self):
        """Per unit, per parameter: frozen (requires_grad=False)."""
        return [[not p.requires_grad for _, p in u.params] for u in self.units]

    def upload(self):
        """Rank 0's upload of the initial parameters: the module's own, kept
        (as float32, on rank 0 only) for a job reset before any checkpoint."""
        if self.init_flats is None:
            self.init_flats = []
            for u in self.units:
                flat = np.empty(u.numel, dtype=np.float32)
                for (_, p), off in zip(u.params, u.offsets):
                    flat[off:off + p.numel()] = p.detach().float().reshape(-1).cpu().numpy()
                self.init_flats.append(flat)
        for u, flat in zip(self.units, self.init_flats):
            self.t.init_unit(u.index, flat)
        if self.imported is not None:  # after the parameters, before step 0
            keys = STATE_KEYS[self.opt._KIND]
            for u in self.units:
                for a, key in enumerate(keys, 1):
                    flat = np.zeros(u.numel, dtype=np.float32)  # frozen: none
                    for (_, p), off in zip(u.params, u.offsets):
                        st = self.imported[1].get(id(p))
                        if st is not None:
                            flat[off:off + p.numel()] = st[key].float().reshape(-1).numpy()
                    self.t.init_unit_state(u.index, a, flat)

    def import_state(self, step, state):
        """An optimizer state to start from (zshard.torch.load_dcp's):
        step, the optimizer's steps taken; state, {parameter: {key:
        tensor}} for every trained parameter. Rank 0 uploads it after the
        parameters; the job is created with steps_taken = step."""
        if self.started:
            raise FailedPrecondition("the job has started: its optimizer state is the servers' "
                                     "(import into a new job before its first forward)")
        trained = [n for u in self.units for n, p in u.params
                   if p.requires_grad and id(p) not in state]
        if trained:
            raise InvalidArgument("the optimizer state has no entry for %s" %
                                  ", ".join(trained[:8]))
        self.imported = (int(step), state)

    def resume(self):
        """After zshard.Resume: back onto the job's timeline. A job that shrank
        without a lost rank (rank_lost: shrink) may have given this one
        another rank: on_world hears of it, with the world size."""
        self.abandon_step()
        before = (self.t.rank, self.t.world_size)
        got = self.t.resume()
        self.o["rank"] = self.t.rank
        state = self.enter(got)
        if (self.t.rank, self.t.world_size) != before and self.o.get("on_world"):
            self.o["on_world"](self.t.rank, self.t.world_size, self.step)
        return state

    def enter(self, state):
        """Starts from what Trainer.resume() said: None (step 0; rank 0
        uploads) or (step, blob). The servers have no hyperparameters of
        this timeline yet."""
        if state is not None:  # this rank's buffers back, the caller's blob out
            if not state[1].startswith(MAGIC) and persistent_buffers(self.root):
                warnings.warn(
                    "zshard: job '%s' resumes at step %d from state that holds no record of "
                    "the model's %d persistent buffers (every rank left cleanly, or a checkpoint "
                    "zshard_checkpoint did not take): they keep this process's values"
                    % (self.o["job"], state[0], len(persistent_buffers(self.root))),
                    stacklevel=3)
            state = (state[0], unframe(self.root, state[1]))
        self.resume_state = state
        self.step = 0 if state is None else state[0]
        self.norms = {}  # another timeline's steps: their norms are not these
        if state is None and self.o["rank"] == 0:
            self.upload()
        self.sent = None
        return state

    # ----------------------------------------------------------- binding
    def _wrap(self, u, ptr):
        np_dt, tview = DT[u.dtype][1], DT[u.dtype][2]
        if isinstance(self.devmode, torch.device):  # device memory
            flat = torch.as_tensor(_DeviceMemory(ptr, u.numel, np.dtype(np_dt).str),
                                   device=self.devmode)
            return flat.view(tview) if tview is not None else flat
        nbytes = u.numel * np.dtype(np_dt).itemsize
        raw = (ctypes.c_char * nbytes).from_address(ptr)
        flat = torch.from_numpy(np.frombuffer(raw, dtype=np_dt, count=u.numel))
        return flat.view(tview) if tview is not None else flat

    def bind(self, u, backward):
        """Unit u's parameters of the step, gathered (waiting for them) and
        set as its parameters' data."""
        ptr = self.t.unit_params_ptr(u.index, backward)
        if ptr != u.ptr:
            self.unbind(u)
            u.ptr = ptr
            u.flat = self._wrap(u, ptr)
            if self.device is not None:  # staged: a copy on the device
                u.flat = self.stage_in(u, u.flat)
            u.key = u.flat.untyped_storage().data_ptr()
            self.by_ptr[u.key] = u
            self.set_data(u, u.flat)
        return u.flat

    def stage_in(self, u, host):
        """A device copy of host (libzshard's buffer). On CUDA through a
        pinned buffer of the unit's, copied to the device asynchronously on
        the current stream (the compute that follows is ordered after it);
        the pinned buffer is reused only once its last copy is done."""
        if self.device.type != "cuda":
            return host.to(self.device, copy=True)
        self.pinned_free(u)
        u.pinned.copy_(host)
        dev = torch.empty(u.numel, dtype=u.dtype, device=self.device)
        dev.copy_(u.pinned, non_blocking=True)
        u.copied.record()
        return dev

    def stage_out(self, u, dev, host):
        """The device's gradient into host (libzshard's buffer), through the
        unit's pinned buffer on CUDA."""
        if self.device.type != "cuda":
            host.copy_(dev)
            return
        self.pinned_free(u)
        u.pinned.copy_(dev)  # synchronous: the push needs the bytes now
        host.copy_(u.pinned)

    def pinned_free(self, u):
        """The unit's pinned buffer (made at first use), once its last copy
        to the device is done."""
        if u.pinned is None:
            u.pinned = torch.empty(u.numel, dtype=u.dtype, pin_memory=True)
            u.copied = torch.cuda.Event()
        else:
            u.copied.synchronize()

    def set_data(self, u, flat):
        for (_, p), off, shape in zip(u.params, u.offsets, u.shapes):
            p.data = flat[off:off + math.prod(shape)].view(shape)

    def unbind(self, u):
        if u.ptr is not None:
            self.by_ptr.pop(u.key, None)
        u.ptr, u.flat, u.key = None, None, None
        for _, p in u.params:
            p.data = self.empty[p.dtype]

    def unbind_grads(self, u):
        u.grad_ptr, u.grad_flat = None, None
        for _, p in u.params:
            p.grad = None

    def grads(self, u):
        """Unit u's gradient buffer (libzshard's, zeroed once per step) as
        its parameters' .grad."""
        if u.grad_flat is None and self.device is not None:
            u.grad_flat = torch.zeros(u.numel, dtype=u.dtype, device=self.device)
        elif u.grad_flat is None:
            u.grad_ptr = self.t.unit_grad_ptr(u.index)
            u.grad_flat = self._wrap(u, u.grad_ptr)
        for (_, p), off, shape in zip(u.params, u.offsets, u.shapes):
            if not p.requires_grad:  # frozen: no gradient, as in torch
                continue
            g = u.grad_flat[off:off + math.prod(shape)].view(shape)
            if p.grad is None:
                p.grad = g
            elif p.grad.data_ptr() != g.data_ptr():  # one autograd made itself
                g.add_(p.grad)
                p.grad = g

    # ------------------------------------------------------------- steps
    def begin_step(self):
        now = self.frozen_now()
        if now != self.frozen:
            changed = [n for u, was, is_ in zip(self.units, self.frozen, now)
                       for (n, _), a, b in zip(u.params, was, is_) if a != b]
            raise FailedPrecondition(
                "requires_grad changed since the job was created (%s): its frozen parameters "
                "are fixed then; a new job (or zshardctl import of an export) freezes others"
                % ", ".join(changed[:8]))
        # this rank's state as of the step's start (RNG, persistent buffers,
        # the data position step_state gives): a replacement of it, if it
        # is lost in this step, computes the step again from it
        extra = self.o["step_state"](self.step) if self.o.get("step_state") else None
        state = frame(self.root, rng_blob(extra))
        if len(state) > (1 << 20):
            raise InvalidArgument("this rank's state at step %d (its RNG states, step_state's "
                                  "object and the model's persistent buffers: %d bytes) exceeds "
                                  "the 1 MiB a replacement of it is handed" % (self.step, len(state)))
        self.t.set_step_state(self.step, state)
        self.t.step_begin(self.step)
        self.in_step = True
        self.backward_started = False
        for u in self.units:
            u.pushed = False
            u.waiting = 0
            if u.ptr is not None:  # last step's parameters are gone
                self.unbind(u)
            for _, p in u.params:  # and so are its gradients (not zero_grad'ed)
                if isinstance(p.grad, OnServers):
                    p.grad = None

    def send_hparams(self):
        h = self.opt.zshard_hparams()
        clip = self.opt.max_grad_norm
        if self.sent != (h, clip):
            self.t.set_hparams(self.step, h, clip_wire(clip))
            self.sent = (h, clip)

    def push(self, u):
        if u.pushed:
            return
        self.grads(u)
        u.pushed = True
        if self.device is not None:  # staged: the device's gradient to libzshard's buffer
            self.stage_out(u, u.grad_flat, self._wrap(u, self.t.unit_grad_ptr(u.index)))
        self.t.unit_push(u.index)
        if self.t.stage != 1:  # stage 1 pushes at the step's end, from these buffers
            self.unbind_grads(u)
        if self.t.stage == 3:
            self.unbind(u)
        mark(self, u, self.step)  # .grad: on the servers (grads.py), never a silent None

    def end_step(self):
        if self.accum:
            raise FailedPrecondition("optimizer.step() while gradients accumulate "
                                     "(set_requires_gradient_sync(False)): a backward with sync "
                                     "on comes first")
        if not self.in_step:
            raise FailedPrecondition("optimizer.step() without a forward and backward pass")
        world = self.t.world_size
        try:
            self.t.step_end()
        finally:
            self.in_step = False
            for u in self.units:
                self.unbind_grads(u)
                if self.t.stage == 3 and u.ptr is not None:
                    self.unbind(u)
        for u in self.units:  # until zero_grad() or the next forward, as torch's
            mark(self, u, self.step)
        self.step += 1
        # a resize: the next step's world, before the caller draws its data
        if self.t.world_size != world and self.o.get("on_world"):
            self.o["on_world"](self.t.rank, self.t.world_size, self.step)

    def abandon_step(self):
        self.in_step = False
        self.accum = False
        if self._sth is not None:
            self._sth.__exit__(None, None, None)
            self._sth = None
        for u in self.units:
            self.unbind_grads(u)
            self.unbind(u)

    # ------------------------------------------------------------- hooks
    def pack(self, x):
        try:
            ptr = x.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return x
        u = self.by_ptr.get(ptr)
        if u is None:
            return x
        return (_Saved, u, x.storage_offset(), tuple(x.shape), x.stride(), x.dtype)

    def unpack(self, x):
        if type(x) is not tuple or not x or x[0] is not _Saved:
            return x
        _, u, off, shape, stride, dt = x
        flat = self.bind(u, True)
        out = flat.as_strided(shape, stride, off)
        return out if out.dtype == dt else out.view(dt)

    def pre_forward(self, module, args):
        u = module._zshard_index_unit
        if not torch.is_grad_enabled():
            if u is self.root_unit:
                self.start()
            for v in u.family:
                self.eval_pre(v)
            return None
        if u is self.root_unit:
            self.start()
            if not self.in_step:
                self.begin_step()
            self._sth = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
            self._sth.__enter__()
        for v in u.family:  # the module's units, one per dtype
            self.bind(v, False)

    def post_forward(self, module, args, out):
        u = module._zshard_index_unit
        if not torch.is_grad_enabled():
            return self.eval_post(u)
        for x in _tensors(out):
            if x.requires_grad:
                x.register_hook(lambda g, u=u: self.pre_backward(u))
        if u is self.root_unit:
            if self._sth is not None:
                self._sth.__exit__(None, None, None)
                self._sth = None
        elif self.t.stage == 3 and u.reshard:
            for v in u.family:
                self.t.unit_forward_done(v.index)
                self.unbind(v)
        return None

    def pre_backward(self, u):
        if not self.backward_started:
            self.backward_started = True
            if self.sync:
                self.send_hparams()
            torch.autograd.Variable._execution_engine.queue_callback(self.backward_done)
            for v in self.units:
                v.waiting = sum(1 for _, p in v.params if p.requires_grad)
        for v in u.family:
            if not v.pushed:
                self.bind(v, True)
                self.grads(v)

    def post_accumulate(self, p):
        u, off = self.slot[id(p)]
        if u.grad_flat is None or p.grad.data_ptr() != u.grad_flat[off:].data_ptr():
            self.grads(u)  # a gradient autograd made itself: added into ours
        u.waiting -= 1
        if u.waiting == 0 and self.sync:
            self.push(u)
        elif u.waiting == 0 and self.t.stage == 3 and u.reshard:
            self.t.unit_forward_done(u.index)  # accumulating: free until the next pass
            self.unbind(u)

    def backward_done(self):
        self.backward_started = False
        if not self.sync:
            self.accum = True
            return
        for u in self.units:  # units some of whose parameters had no gradient
            self.push(u)
        self.accum = False

    # ---------------------------------------------------------- clipping
    def needs_norm(self, what, max_norm=None):
        """Refuses, saying how to turn it on, where the servers compute no
        gradient norm (the job was created without clipping)."""
        if self.opt is not None and self.opt.max_grad_norm:
            return
        v = "%g" % float(max_norm) if max_norm is not None else "MAX_NORM"
        raise FailedPrecondition(
            "%s on a zshard model: the gradients are on the servers, which compute their norm "
            "only for a job that clips (inf: compute it, never clip): give the zshard optimizer "
            "max_grad_norm=%s (zshard.torch.AdamW(..., max_grad_norm=%s), or "
            "zshard.torch.from_optimizer(opt, max_grad_norm=%s) for a torch optimizer handed "
            "over) before the job's first step" % (what, v, v, v))

    def grad_norm(self, step):
        """The servers' global gradient norm of step (waiting for it)."""
        if step not in self.norms:
            self.norms = {s: n for s, n in self.norms.items() if s > step - 4}
            self.norms[step] = self.t.grad_norm(step, self.o["op_timeout_ms"] or 120000)
        return self.norms[step]

    def clip(self, max_norm, norm_type):
        """clip_grad_norm_ of this job's parameters: this step's norm."""
        if float(norm_type) != 2.0:
            raise InvalidArgument("the servers clip by the L2 norm; norm_type=%s is not offered"
                                  % (norm_type,))
        self.needs_norm("clip_grad_norm_", max_norm)
        clip = self.opt.max_grad_norm
        if not self.in_step or self.accum or any(not u.pushed for u in self.units):
            raise FailedPrecondition("clip_grad_norm_ is called between loss.backward() (with "
                                     "gradient sync on) and optimizer.step()")
        sent = self.sent[1] if self.sent is not None else clip
        if float(max_norm) != sent:
            raise FailedPrecondition(
                "the servers clip step %d at max_grad_norm=%g, sent before its backward pass; "
                "clip_grad_norm_(max_norm=%g) cannot change that now: set the optimizer's "
                "max_grad_norm before the backward" % (self.step, sent, float(max_norm)))
        return self.grad_norm(self.step)

    # ------------------------------------------------- forward without grad
    def gathered(self, u):
        """Unit u's parameters of the last completed step, gathered outside
        the step driver into a tensor of their own (on the host)."""
        buf = np.empty(u.numel, dtype=DT[u.dtype][1])
        bound = self.o["op_timeout_ms"] or 120000  # the step driver's default bound
        if not self.t.gather(u.index, self.step, out=buf).wait(bound):
            raise TimedOut("unit '%s' of step %d was not gathered within %d ms" %
                           (u.name, self.step, bound))
        flat = torch.from_numpy(buf)
        return flat.view(DT[u.dtype][2]) if DT[u.dtype][2] is not None else flat

    def eval_pre(self, u):
        """A forward under no_grad (evaluation): parameters of the last
        completed step, gathered outside the step driver, until the root's
        forward ends."""
        self.start()
        if self.in_step:  # (a hook that returns something replaces the input)
            self.bind(u, False)
            return None
        flat = self.gathered(u)
        self.set_data(u, flat if self.pdev.type == "cpu" else flat.to(self.pdev))
        self.eval_units.add(u.index)
        return None

    def eval_post(self, u):
        if self.in_step or u is not self.root_unit:
            return None
        for v in self.units:
            if v.index in self.eval_units:
                for _, p in v.params:
                    p.data = self.empty[p.dtype]
        self.eval_units.clear()
        return None


_Saved = object()  # marks what the saved-tensor hook keeps in place of a parameter


def _tensors(out):
    if isinstance(out, torch.Tensor):
        yield out
    elif isinstance(out, (tuple, list)):
        for x in out:
            yield from _tensors(x)
    elif isinstance(out, dict):
        for x in out.values():
            yield from _tensors(x)
    elif hasattr(out, "__dataclass_fields__"):
        for k in out.__dataclass_fields__:
            yield from _tensors(getattr(out, k))


def _group_json(kind, g):
    if kind in ("adamw", "adam"):
        return {k: g[k] for k in ("lr", "weight_decay", "beta1", "beta2", "eps")}
    if kind == "adagrad":
        return {k: g[k] for k in ("lr", "weight_decay", "eps")}
    return {k: g[k] for k in ("lr", "weight_decay", "momentum")}
