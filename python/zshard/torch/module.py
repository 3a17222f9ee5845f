"""fully_shard and what it adds to the root module (see zshard.torch)."""
import math
import os
from typing import Dict, Optional, Tuple

import torch

from zshard.errors import FailedPrecondition, InvalidArgument, TimedOut
from zshard.trainer import Trainer
from zshard.torch.job import Job
from zshard.torch.start import check_choice
from zshard.torch.blob import frame


class ZshardModule:
    """What fully_shard adds to the root module."""

    def zshard_start(self) -> Optional[Tuple[int, bytes]]:
        """Creates (rank 0) or joins the job, and says where training starts:
        None for a new job (step 0; rank 0 uploaded the parameters), else
        (step, blob): the step to continue from and this rank's blob of the
        checkpoint, or, in a process that replaces this rank lost mid-step,
        the step it was lost in and its state then (rng_blob of step_state's
        object: load_rng_blob(blob) puts the RNG states back; the buffers
        are back already; the job did not roll back, the step is computed
        again). The first forward calls it if you do not."""
        return self._zshard.start()

    def zshard_resume(self) -> Optional[Tuple[int, bytes]]:
        """After zshard.Resume (the job rolled back): None or (step, blob)."""
        return self._zshard.resume()

    @property
    def zshard_step(self) -> int:
        """The step the next forward and backward compute."""
        return self._zshard.step

    @property
    def zshard_world(self) -> Tuple[int, int]:
        """(rank, world size) of the step the next forward computes: after
        zshardctl job resize (or zshard.resize_job) the world size changes
        between steps; known as the step before ends (optimizer.step()), so
        a data loader sharded by it re-shards in time. A rank at or above
        the world size leaves: its next forward raises zshard.Canceled.
        fully_shard's on_world is called when it changes."""
        return self._zshard.t.rank, self._zshard.t.world_size

    @property
    def zshard_trainer(self) -> Trainer:
        """The zshard.Trainer underneath (counters, last_step, ...)."""
        return self._zshard.t

    def set_requires_gradient_sync(self, requires_gradient_sync: bool) -> None:
        """As FSDP2's: False keeps gradients here (accumulating over the next
        backward passes); the backward that runs with True pushes the sum."""
        self._zshard.sync = bool(requires_gradient_sync)

    def zshard_checkpoint(self, blob: bytes = b"", wait: bool = True,
                          timeout_ms: int = 600000) -> int:
        """A checkpoint of the current step boundary (model, optimizer state,
        the step) with this rank's blob (rng_blob() helps) and this rank's
        persistent buffers (which a resume puts back, and zshardctl export
        --bare-names writes: rank 0's), up to 1 MiB together; every rank
        calls it. Returns its id once committed (wait=False: at once)."""
        j = self._zshard
        if j.in_step:
            raise FailedPrecondition("a checkpoint is taken between steps "
                                     "(after optimizer.step())")
        framed = frame(self, blob)  # the model's persistent buffers, with the blob
        if len(framed) > (1 << 20):
            raise InvalidArgument("the blob (%d bytes) and the model's persistent buffers (%d "
                                  "bytes) exceed a checkpoint blob's 1 MiB"
                                  % (len(blob), len(framed) - len(blob)))
        ident = j.t.checkpoint(j.step, framed)
        if wait and not j.t.checkpoint_wait(ident, timeout_ms):
            raise TimedOut("checkpoint %d did not commit within %d ms" % (ident, timeout_ms))
        return ident

    def zshard_state_dict(self) -> Dict[str, torch.Tensor]:
        """The full parameters of the last completed step, by qualified name
        (every name of a tied parameter, as the model's state_dict names
        them), as float32 CPU tensors, and the buffers: for load_state_dict
        into a plain module, or safetensors."""
        j = self._zshard
        j.start()
        got = {}
        for u in j.units:
            flat = j.gathered(u)
            for (_, p), off, shape in zip(u.params, u.offsets, u.shapes):
                got[id(p)] = flat[off:off + math.prod(shape)].view(shape).float()
        out = {}
        for n, p in self.named_parameters(remove_duplicate=False):
            out[n] = got[id(p)].clone()
        for n, b in self.named_buffers():
            out[n] = b.detach().cpu().clone()
        return out

    def state_dict(self, *args, **kwargs):
        """The module's state dict with the trained values: parameters of
        the last completed step, gathered from the servers (CPU tensors of
        the parameters' dtype, every name of a tied parameter), and
        the persistent buffers, keys as torch makes them. Before the job
        started, the module's own. Between steps only (a step's parameters
        are half updated on the servers): FailedPrecondition otherwise."""
        j = self._zshard
        sd = super().state_dict(*args, **kwargs)
        if not j.started:
            return sd
        if j.in_step:
            raise FailedPrecondition("state_dict() is taken between steps (after "
                                     "optimizer.step()): the servers are applying this one")
        prefix = kwargs.get("prefix", args[1] if len(args) > 1 else "")
        got = {}
        for u in j.units:
            flat = j.gathered(u)
            for (_, p), off, shape in zip(u.params, u.offsets, u.shapes):
                got[id(p)] = flat[off:off + math.prod(shape)].view(shape).to(p.dtype)
        for n, p in self.named_parameters(remove_duplicate=False):
            if prefix + n in sd:
                sd[prefix + n] = got[id(p)].clone()
        return sd

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Loads into the module before its job started (the first forward
        uploads it); after, the parameters are the servers' and a load here
        would change nothing there: FailedPrecondition, saying what to do."""
        if self._zshard.started:
            raise FailedPrecondition(
                "load_state_dict() after the job started changes nothing on its servers: load "
                "before the first forward (rank 0 uploads it), or zshardctl import, or restore "
                "a checkpoint (zshardctl checkpoint restore)")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """As FSDP's: this step's global gradient norm (the servers clip at
        the optimizer's max_grad_norm, which max_norm must equal); called
        between loss.backward() and optimizer.step()."""
        return torch.tensor(self._zshard.clip(max_norm, norm_type), dtype=torch.float32)

    def zshard_close(self) -> None:
        """Leaves the job (cleanly between steps)."""
        j = self._zshard
        if j.t is not None:
            j.t.close()
            j.t = None
            j.started = False


def fully_shard(module: torch.nn.Module, *, reshard_after_forward: bool = True,
                job: Optional[str] = None, coordinator: Optional[str] = None,
                rank: Optional[int] = None, world_size: Optional[int] = None, stage: int = 3,
                transport: str = "auto", prefetch: int = 1, push_depth: int = 0,
                op_timeout_ms: int = 0, timeout_ms: int = 10000, join_timeout_s: float = 900.0,
                checkpoint_every: int = 0, step_state=None, on_world=None,
                staged: bool = False, device: Optional[str] = None,
                collective: bool = False, data_tls: bool = False,
                readers: int = 0, resume="auto") -> torch.nn.Module:
    """Marks module as a zshard unit (its parameters gathered and freed as
    one); on the root (job= given, called last) builds the job from the
    marked units: the root keeps what no unit claims. Returns module.

    The root's arguments: job (its name: created by rank 0 from the model,
    joined by every rank), coordinator ($ZSHARD_COORDINATOR, else
    $ZSHARD_CONFIG's, else the local cluster zshard-local started), rank ($RANK),
    world_size ($WORLD_SIZE), stage (1, 2, 3), transport (auto, tcp, shm,
    rdma), prefetch (units gathered ahead), push_depth (pushes in flight),
    op_timeout_ms (the longest wait for one gather or push), timeout_ms
    (one join's wait for servers), join_timeout_s (how long ranks other than
    0 wait for rank 0 to create the job: torchrun's rendezvous default),
    checkpoint_every (the job's automatic checkpoints, without
    blobs), step_state (a callable: step -> a picklable object, the data
    loader's position at the start of that step; with the RNG states and
    the persistent buffers it is this rank's state each step, from which a
    process replacing this rank, lost mid-step, computes the step again:
    its zshard_start() returns (step, blob), the buffers back already, and
    load_rng_blob(blob) puts the RNG states back and gives the object, as
    for a checkpoint's blob made with rng_blob), on_world (a callable:
    (rank, world_size, step) when the job's world size changes from that
    step on, zshardctl job resize: called as the step before ends, by
    optimizer.step(), so the data loader re-shards before drawing the
    step's batch; the root's zshard_world says the same), staged (parameters as tensors of their own, copied from and to
    libzshard's host buffers; otherwise CPU parameters are libzshard's host
    buffers and CUDA parameters its device buffers: libzshard's device mode,
    which stages gathers and gradients through pinned memory on a copy
    stream of its own that torch's current stream waits for), device
    ("emulated": CPU parameters in libzshard's emulated device memory,
    the device mode's path without a GPU, for tests), collective (the
    trainers reduce among themselves over NCCL, each pushing only its slice's
    sum to the servers: the job's "collective": "nccl"; device mode only),
    data_tls (the job's tcp data plane encrypted: TLS 1.3 records keyed by
    the job's token; the job spec's "data_tls"), readers (how many versions
    weight readers, zshard.Reader, may pin at once on the job's servers:
    the spec's "readers": {"pins": N}; each a copy of the parameters in
    their dtype there), resume (what a job that already has state is
    continued from: "auto", the default, continues where its processes
    were lost (a crash, torchrun restarting its workers, a restore) and
    refuses a job whose last run ended (every rank left it cleanly),
    naming its step; True continues any state; False refuses any; "fresh"
    deletes the job's state and checkpoints (rank 0) and starts anew from
    this model. Rank 0 says where a job continues from. A process that
    replaces a rank lost mid-step rejoins whatever the choice)."""
    if job is None:
        module._zshard_unit = bool(reshard_after_forward)
        return module
    check_choice(resume)
    from zshard.torch.accel import install_accelerate
    install_accelerate()  # Trainer's clipping and wrapping (accel.py)
    if rank is None:
        rank = int(os.environ.get("RANK", "0"))
    if world_size is None:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
    # None: $ZSHARD_CONFIG's, else the local cluster's (zshard-local start)
    coordinator = coordinator or os.environ.get("ZSHARD_COORDINATOR")
    opts = dict(job=job, coordinator=coordinator, rank=rank, world_size=world_size,
                stage=stage, transport=transport, prefetch=prefetch,
                reshard_after_forward=reshard_after_forward, push_depth=push_depth,
                op_timeout_ms=op_timeout_ms, timeout_ms=timeout_ms,
                join_timeout_s=float(join_timeout_s), checkpoint_every=checkpoint_every,
                step_state=step_state, on_world=on_world, staged=staged, device=device, collective=collective,
                data_tls=bool(data_tls), readers=int(readers), resume=resume, local_rank=int(os.environ.get(
                    "LOCAL_RANK", "0")))
    st = Job(module, opts)
    st.collect()
    module._zshard = st
    module.__class__ = type("Zshard" + module.__class__.__name__,
                            (ZshardModule, module.__class__), {})
    companions = {id(v) for u in st.units for v in u.family[1:]}
    hooked = [st.root_unit] + [u for u in st.units if u is not st.root_unit]
    for u in hooked:
        if id(u) not in companions:  # a module's units of other dtypes: the first's hooks
            u.module._zshard_index_unit = u
            u.module.register_forward_pre_hook(st.pre_forward)
            u.module.register_forward_hook(st.post_forward)
        for _, p in u.params:
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(st.post_accumulate)
    return module
