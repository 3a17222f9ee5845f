"""The optimizers of zshard.torch: torch.optim.Optimizer objects whose
param_groups carry the hyperparameters; the update itself runs on the
shard servers."""
from typing import Optional, Tuple

import torch

from zshard.errors import FailedPrecondition, InvalidArgument
from zshard.torch.job import OWNER


class NoGradNorm(FailedPrecondition, AttributeError):
    """last_grad_norm where there is none (no step ended yet, a job that
    does not clip): an AttributeError too, as for an absent attribute, so
    that getattr(opt, "last_grad_norm", None) gives None."""


class _Optim:
    """What the zshard optimizers share: param_groups carry the values."""

    _KIND = None

    def _zshard_init(self, max_grad_norm):
        self.zshard_hparams()  # a group asking for what the servers do not do: refused now
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
        if not self.max_grad_norm:
            try:
                self._zs.needs_norm("last_grad_norm")
            except FailedPrecondition as e:
                raise NoGradNorm(e.args[0]) from None
        if self._zs.step == 0:
            raise NoGradNorm("last_grad_norm: no step has ended yet")
        return self._zs.grad_norm(self._zs.step - 1)

    def zero_grad(self, set_to_none=True):
        """Gradients were pushed with the backward pass: what is left here
        (an accumulation in progress is kept: the next backward adds to it)."""
        if not self._zs.accum:
            for g in self.param_groups:
                for p in g["params"]:
                    p.grad = None


def _refuse(what: str, **given) -> None:
    """Refuses, by name, each option whose value asks for semantics the
    servers do not implement (performance-only flags are accepted and
    ignored: the update runs on the servers)."""
    for k, (v, plain) in given.items():
        if v != plain:
            raise InvalidArgument("%s: %s=%r is not implemented by zshard's servers (only %s=%r)"
                                  % (what, k, v, k, plain))


def _adam_values(what: str, g) -> dict:
    """An AdamW or Adam param group's values, what neither implements refused."""
    _refuse(what, amsgrad=(g.get("amsgrad", False), False),
            maximize=(g.get("maximize", False), False),
            differentiable=(g.get("differentiable", False), False))
    b1, b2 = g["betas"]
    return {"lr": float(g["lr"]), "weight_decay": float(g["weight_decay"]),
            "beta1": float(b1), "beta2": float(b2), "eps": float(g["eps"]), "momentum": 0.0}


class AdamW(_Optim, torch.optim.Optimizer):
    """torch.optim.AdamW, as its signature reads, applied by the shard
    servers (zshard's AdamW: docs/DESIGN.md; the same update as torch's).
    foreach, fused and capturable only choose how torch would compute it:
    accepted and ignored. amsgrad, maximize and differentiable ask for
    another update: refused by name. max_grad_norm: global-norm clipping
    (None: off) on the servers; it may change between steps but not be
    turned on or off; inf computes the norm (clip_grad_norm_ returns it, as
    Hugging Face Trainer logs it) and never clips."""

    _KIND = "adamw"

    def __init__(self, params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: Optional[bool] = None,
                 capturable: bool = False, differentiable: bool = False,
                 fused: Optional[bool] = None,
                 max_grad_norm: Optional[float] = None) -> None:
        _refuse("AdamW", amsgrad=(amsgrad, False), maximize=(maximize, False),
                differentiable=(differentiable, False))
        torch.optim.Optimizer.__init__(self, params, dict(lr=lr, betas=betas, eps=eps,
                                                          weight_decay=weight_decay))
        self._zshard_init(max_grad_norm)

    def _group_values(self, g):
        return _adam_values("AdamW param group", g)


class SGD(_Optim, torch.optim.Optimizer):
    """torch.optim.SGD, as its signature reads: lr, momentum and
    weight_decay (L2, added to the gradient, as torch's), applied by the
    shard servers. foreach and fused are accepted and ignored; dampening,
    nesterov, maximize and differentiable ask for another update: refused
    by name."""

    _KIND = "sgd"

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: Optional[bool] = None, differentiable: bool = False,
                 fused: Optional[bool] = None,
                 max_grad_norm: Optional[float] = None) -> None:
        _refuse("SGD", dampening=(dampening, 0.0), nesterov=(nesterov, False),
                maximize=(maximize, False), differentiable=(differentiable, False))
        torch.optim.Optimizer.__init__(self, params, dict(lr=lr, momentum=momentum,
                                                          weight_decay=weight_decay))
        self._zshard_init(max_grad_norm)

    def _group_values(self, g):
        _refuse("SGD param group", dampening=(g.get("dampening", 0.0), 0.0),
                nesterov=(g.get("nesterov", False), False),
                maximize=(g.get("maximize", False), False),
                differentiable=(g.get("differentiable", False), False))
        return {"lr": float(g["lr"]), "weight_decay": float(g["weight_decay"]),
                "beta1": 0.0, "beta2": 0.0, "eps": 0.0, "momentum": float(g["momentum"])}


class Adam(_Optim, torch.optim.Optimizer):
    """torch.optim.Adam, as its signature reads: weight_decay is L2 added to
    the gradient (torch's Adam; decoupled_weight_decay=True makes it
    AdamW's update, and the job's optimizer AdamW), applied by the shard
    servers. foreach, fused and capturable are accepted and ignored;
    amsgrad, maximize and differentiable ask for another update: refused
    by name."""

    _KIND = "adam"

    def __init__(self, params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 foreach: Optional[bool] = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False,
                 fused: Optional[bool] = None, decoupled_weight_decay: bool = False,
                 max_grad_norm: Optional[float] = None) -> None:
        _refuse("Adam", amsgrad=(amsgrad, False), maximize=(maximize, False),
                differentiable=(differentiable, False))
        torch.optim.Optimizer.__init__(self, params, dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay))
        if self.param_groups[0]["decoupled_weight_decay"]:
            self._KIND = "adamw"
        self._zshard_init(max_grad_norm)

    def _group_values(self, g):
        # the job's update is the first group's (AdamW's when decoupled);
        # a group asking for the other, then or since, is refused
        if bool(g.get("decoupled_weight_decay", False)) != (self._KIND == "adamw"):
            raise InvalidArgument("Adam: decoupled_weight_decay differs between param groups "
                                  "(a job has one update: AdamW's or Adam's)")
        return _adam_values("Adam param group", g)


class Adagrad(_Optim, torch.optim.Optimizer):
    """torch.optim.Adagrad, as its signature reads, applied by the shard
    servers: lr_decay is torch's (the lr sent for step t is
    lr / (1 + (t - 1) * lr_decay), the value torch's update uses),
    weight_decay is L2 added to the gradient. foreach and fused are
    accepted and ignored; initial_accumulator_value other than 0, maximize
    and differentiable are refused by name."""

    _KIND = "adagrad"

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach: Optional[bool] = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 fused: Optional[bool] = None,
                 max_grad_norm: Optional[float] = None) -> None:
        _refuse("Adagrad", initial_accumulator_value=(initial_accumulator_value, 0.0),
                maximize=(maximize, False), differentiable=(differentiable, False))
        torch.optim.Optimizer.__init__(self, params, dict(
            lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
            initial_accumulator_value=initial_accumulator_value))
        self._zshard_init(max_grad_norm)

    def _group_values(self, g):
        _refuse("Adagrad param group",
                initial_accumulator_value=(g.get("initial_accumulator_value", 0.0), 0.0),
                maximize=(g.get("maximize", False), False),
                differentiable=(g.get("differentiable", False), False))
        step = self._zs.step if getattr(self, "_zs", None) is not None else 0
        # torch's clr = lr / (1 + (step - 1) * lr_decay), step 1-based
        lr = float(g["lr"]) / (1 + step * float(g["lr_decay"]))
        return {"lr": lr, "weight_decay": float(g["weight_decay"]), "beta1": 0.0,
                "beta2": 0.0, "eps": float(g["eps"]), "momentum": 0.0}


# the hyperparameters each kind takes from a torch optimizer's groups, and
# the flags that would ask for another update (each group's checked)
_TAKES = {torch.optim.AdamW: ("lr", "betas", "eps", "weight_decay"),
          torch.optim.SGD: ("lr", "momentum", "weight_decay"),
          torch.optim.Adam: ("lr", "betas", "eps", "weight_decay"),
          torch.optim.Adagrad: ("lr", "lr_decay", "weight_decay", "eps",
                                "initial_accumulator_value")}
_FLAGS = ("amsgrad", "maximize", "differentiable", "dampening", "nesterov",
          "decoupled_weight_decay")


def from_optimizer(opt: torch.optim.Optimizer,
                   max_grad_norm: Optional[float] = None) -> _Optim:
    """The zshard optimizer doing what opt (a torch.optim.AdamW, SGD, Adam or
    Adagrad) would: its param groups and their hyperparameters taken as they are (and what
    it does not implement refused by name, as the constructors do). The
    parameters must be a fully_shard'ed model's, and opt must not have
    stepped yet (its state would not be on the servers). A scheduler made
    on opt changes opt, not the result: make it on the result."""
    if isinstance(opt, _Optim):
        return opt
    cls = {torch.optim.AdamW: AdamW, torch.optim.SGD: SGD, torch.optim.Adam: Adam,
           torch.optim.Adagrad: Adagrad}.get(type(opt))
    if cls is None:
        raise InvalidArgument("%s is not on zshard's servers (AdamW, SGD, Adam and Adagrad are)"
                              % type(opt).__name__)
    # state from steps taken (Adagrad makes its own at construction, at step 0)
    if any(float(st["step"]) > 0 if "step" in st else bool(st) for st in opt.state.values()):
        raise FailedPrecondition("%s has taken steps: its state (%d parameters') is not on the "
                                 "servers; hand it over before its first step"
                                 % (type(opt).__name__, len(opt.state)))
    groups = []
    for g in opt.param_groups:
        ng = {k: g[k] for k in _TAKES[type(opt)]}
        ng.update({k: g[k] for k in _FLAGS if k in g})
        ng["params"] = list(g["params"])
        groups.append(ng)
    return cls(groups, max_grad_norm=max_grad_norm)
