"""The optimizers of zshard.torch: torch.optim.Optimizer objects whose
param_groups carry the hyperparameters; the update itself runs on the
shard servers."""
from typing import Optional, Tuple

import torch

from zshard.errors import FailedPrecondition, InvalidArgument
from zshard.torch.job import OWNER


class _Optim:
    """What the zshard optimizers share: param_groups carry the values."""

    _KIND = None

    def _zshard_init(self, max_grad_norm):
        self.max_grad_norm = float(max_grad_norm or 0.0)
        self._zs = None
        seen = set()
        for g in self.param_groups:
            for p in g["params"]:
                owner = OWNER.get(id(p))
                if owner is None:
                    raise InvalidArgument("a parameter of the optimizer is in no zshard module "
                                          "(fully_shard the root module first)")
                if self._zs is None:
                    self._zs = owner
                elif owner is not self._zs:
                    raise InvalidArgument("the optimizer's parameters span two zshard jobs")
                seen.add(id(p))
        if self._zs is None:
            raise InvalidArgument("the optimizer has no parameters")
        self._zs.attach(self, seen)

    def _group_values(self, g):
        raise NotImplementedError

    def zshard_hparams(self):
        """The values of every group as libzshard takes them."""
        return [self._group_values(g) for g in self.param_groups]

    @torch.no_grad()
    def step(self, closure=None):
        """Ends the step: every gradient pushed and acknowledged. The update
        itself runs on the servers (the next gather waits for it)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._zs.end_step()
        return loss

    @property
    def last_grad_norm(self) -> float:
        """The global gradient norm (all ranks', before clipping) of the
        last step ended, as the servers computed it to clip: for logging.
        Waits for the slowest rank's pushes of that step. Needs
        max_grad_norm (otherwise the servers compute no norm)."""
        if self._zs.step == 0:
            raise FailedPrecondition("no step has ended yet")
        if not self.max_grad_norm:
            raise FailedPrecondition("the servers compute the gradient norm to clip: create "
                                     "the optimizer with max_grad_norm to have it")
        return self._zs.grad_norm(self._zs.step - 1)

    def zero_grad(self, set_to_none=True):
        """Gradients were pushed with the backward pass: what is left here
        (an accumulation in progress is kept: the next backward adds to it)."""
        if not self._zs.accum:
            for g in self.param_groups:
                for p in g["params"]:
                    p.grad = None


class AdamW(_Optim, torch.optim.Optimizer):
    """torch.optim.AdamW's hyperparameters, applied by the shard servers
    (zshard's AdamW: docs/DESIGN.md). amsgrad, maximize and foreach/fused
    are not offered. max_grad_norm: global-norm clipping (None: off) on the
    servers; it may change between steps but not be turned on or off."""

    _KIND = "adamw"

    def __init__(self, params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2,
                 max_grad_norm: Optional[float] = None) -> None:
        torch.optim.Optimizer.__init__(self, params, dict(lr=lr, betas=betas, eps=eps,
                                                          weight_decay=weight_decay))
        self._zshard_init(max_grad_norm)

    def _group_values(self, g):
        b1, b2 = g["betas"]
        return {"lr": float(g["lr"]), "weight_decay": float(g["weight_decay"]),
                "beta1": float(b1), "beta2": float(b2), "eps": float(g["eps"]),
                "momentum": 0.0}


class SGD(_Optim, torch.optim.Optimizer):
    """torch.optim.SGD's lr, momentum and weight_decay, applied by the shard
    servers (no dampening, no Nesterov)."""

    _KIND = "sgd"

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0,
                 weight_decay: float = 0.0, max_grad_norm: Optional[float] = None) -> None:
        torch.optim.Optimizer.__init__(self, params, dict(lr=lr, momentum=momentum,
                                                          weight_decay=weight_decay))
        self._zshard_init(max_grad_norm)

    def _group_values(self, g):
        return {"lr": float(g["lr"]), "weight_decay": float(g["weight_decay"]),
                "beta1": 0.0, "beta2": 0.0, "eps": 0.0, "momentum": float(g["momentum"])}
