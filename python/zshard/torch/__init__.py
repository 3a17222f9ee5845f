"""zshard.torch: PyTorch modules trained through zshard, in the spirit of
FSDP2's ``fully_shard``.

    from zshard.torch import fully_shard, AdamW
    for block in model.blocks:
        fully_shard(block)                      # a unit: gathered and freed as one
    fully_shard(model, job="gpt", stage=3)      # the root: what is left, and the job
    opt = AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
                lr=3e-4, betas=(0.9, 0.95), max_grad_norm=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine)
    start = model.zshard_start()                # None, or (step, blob) to resume from
    for step in range(start_step, steps):
        loss = model(x).loss                     # gathers each unit before its forward
        loss.backward()                          # pushes each unit's gradient when done
        opt.step()                               # the step ends; the servers update
        sched.step()
        opt.zero_grad()

What happens: the root's forward begins the step (zs_step_begin); each
unit's parameters are gathered before its forward (the next one prefetched),
and at stage 3 freed after it; parameters saved for the backward pass are
not kept alive by autograd but gathered again when the backward needs them
(saved-tensor hooks); each unit's gradient lands in libzshard's buffer (set
as the parameters' .grad before their backward) and is pushed as soon as the
last of its parameters has its gradient. The optimizer runs on the shard
servers: the optimizer object here only carries the values of its
param_groups (lr, weight_decay, betas, eps, momentum), which go to the
servers before each step's first push, so any torch.optim.lr_scheduler
drives it. AdamW, SGD, Adam (L2 decay) and Adagrad take torch's
signatures (foreach, fused, capturable accepted and ignored; amsgrad,
maximize, nesterov, dampening, a non-zero initial_accumulator_value
refused by name), and from_optimizer(opt) takes over a torch.optim.AdamW,
SGD, Adam or Adagrad made the usual way, groups and all. Clipping is the
servers' (the optimizer's max_grad_norm);
torch.nn.utils.clip_grad_norm_ over a zshard model's parameters returns
the step's global norm as the servers computed it (max_norm must equal
max_grad_norm) and refuses what it cannot do; optimizer.last_grad_norm
gives the last step's for logging. Parameters with requires_grad=False are frozen in the job (held
and gathered, never updated; the set is fixed when the job is created).
The root's own parameters (embeddings, a tied output head, the
last norm) stay gathered through the step, as FSDP2's root.

CPU parameters are views of libzshard's buffers: no copy between a gather
and the parameter, nor between a gradient and its push. Between steps the
parameters are the last gathered ones at stages 1 and 2 (empty at stage 3);
after the backward pass gradients live on the servers (.grad is an
OnServers until zero_grad: it refuses any use of its values, saying what
to call; grads.py).

Rank, world size and coordinator come from RANK, WORLD_SIZE and
ZSHARD_COORDINATOR (torchrun's conventions; LOCAL_RANK is kept for the
device), or the arguments of the root's fully_shard.
"""
from zshard.torch import clip as _clip
from zshard.torch.blob import load_rng_blob, rng_blob
from zshard.torch.hf import save_pretrained
from zshard.dcp import load_model_dcp as load_dcp
from zshard.torch.module import ZshardModule, fully_shard
from zshard.torch.optim import SGD, Adagrad, Adam, AdamW, from_optimizer

_clip.install()

__all__ = ["fully_shard", "ZshardModule", "AdamW", "SGD", "Adam", "Adagrad", "from_optimizer",
           "rng_blob", "load_rng_blob", "save_pretrained", "load_dcp"]
