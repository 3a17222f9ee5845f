"""torch.nn.utils.clip_grad_norm_ for zshard modules: the gradients are on
the servers, which clip by the global norm they compute (the optimizer's
max_grad_norm, sent before the backward pass); this returns that norm, or
refuses what it cannot do. Other parameters go to torch's own."""
import math

import torch

from zshard.errors import FailedPrecondition, InvalidArgument
from zshard.torch.job import OWNER

_TORCH = torch.nn.utils.clip_grad_norm_


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """As torch's, for a zshard module's parameters: the total norm of this
    step's gradient (all ranks', every trained parameter, before clipping)
    as the servers computed it, waiting for it; the clipping itself is the
    servers', at the optimizer's max_grad_norm, which max_norm must equal.
    Parameters of no zshard module: torch's own function."""
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    jobs = {id(OWNER[id(p)]): OWNER[id(p)] for p in params if id(p) in OWNER}
    if not jobs:
        return _TORCH(params, max_norm, norm_type, error_if_nonfinite=error_if_nonfinite,
                      foreach=foreach)
    if len(jobs) > 1 or any(id(p) not in OWNER for p in params):
        raise InvalidArgument("clip_grad_norm_ over parameters of a zshard module and others "
                              "(or of two jobs): their gradients are in different places; "
                              "clip each set on its own")
    total = next(iter(jobs.values())).clip(max_norm, norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError("The total norm of order %s for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped." % float(norm_type))
    return torch.tensor(total, dtype=torch.float32)


def install():
    """Puts clip_grad_norm_ where torch code calls it from (Hugging Face
    Trainer and Accelerate call torch.nn.utils.clip_grad_norm_)."""
    torch.nn.utils.clip_grad_norm_ = clip_grad_norm_
    torch.nn.utils.clip_grad.clip_grad_norm_ = clip_grad_norm_

