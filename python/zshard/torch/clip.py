"""torch's gradient-norm functions for zshard modules: the gradients are on
the servers, which clip by the global norm they compute (the optimizer's
max_grad_norm, sent before the backward pass). Over a zshard job's
parameters (or their .grad, grads.OnServers) these return that norm, or
refuse what they cannot do; over anything else they are torch's own.

install() makes torch's own function objects answer so, however they were
imported: torch.nn.utils.clip_grad_norm_, get_total_norm and
clip_grads_with_norm_ are each a no-grad wrapper around the function that
does the work; the wrapper's cell is pointed at this module's function,
which calls torch's for parameters of no zshard job. A name bound before
zshard.torch was imported (from torch.nn.utils import clip_grad_norm_) is
the same wrapper, so it answers the same. Where torch's functions are not
such wrappers, the module attributes are replaced instead, and a name
bound earlier meets the OnServers gradients, which raise, saying what to
call."""
import math

import torch
import torch.nn.utils.clip_grad as _cg

from zshard.errors import FailedPrecondition, InvalidArgument
from zshard.torch.grads import OnServers
from zshard.torch.job import OWNER

# torch's functions that do the work (set by install(); until then the
# module's attributes)
_THEIRS = {}


def _torch(name, *args, **kwargs):
    with torch.no_grad():
        return _THEIRS.get(name, getattr(_cg, name))(*args, **kwargs)


def _one_job(params, what):
    """The job whose parameters params are all of, or None when none is
    a zshard parameter; every trained parameter of the job must be there
    (the servers compute the norm of all of them)."""
    jobs = {id(OWNER[id(p)]): OWNER[id(p)] for p in params if id(p) in OWNER}
    if not jobs:
        return None
    if len(jobs) > 1 or any(id(p) not in OWNER for p in params):
        raise InvalidArgument("%s over parameters of a zshard module and others (or of two "
                              "jobs): their gradients are in different places; clip each set "
                              "on its own" % what)
    job = next(iter(jobs.values()))
    given = {id(p) for p in params}
    left = [n for u in job.units for n, p in u.params if p.requires_grad and id(p) not in given]
    if left:
        raise InvalidArgument(
            "%s over %d of a zshard job's trained parameters (not %s%s): the servers compute "
            "the norm of every gradient of the job; pass model.parameters()"
            % (what, len(given), ", ".join(left[:4]), ", ..." if len(left) > 4 else ""))
    return job


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """As torch's, for a zshard module's parameters: the total norm of this
    step's gradient (all ranks', every trained parameter, before clipping)
    as the servers computed it, waiting for it; the clipping itself is the
    servers', at the optimizer's max_grad_norm, which max_norm must equal.
    Parameters of no zshard module: torch's own function."""
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    job = _one_job(params, "clip_grad_norm_")
    if job is None:
        return _torch("clip_grad_norm_", params, max_norm, norm_type,
                      error_if_nonfinite=error_if_nonfinite, foreach=foreach)
    total = job.clip(max_norm, norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError("The total norm of order %s for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped." % float(norm_type))
    return torch.tensor(total, dtype=torch.float32)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """As torch's, where tensors are a zshard model's gradients (its
    parameters' .grad after the backward pass, every trained one): their
    global norm, as the servers computed it. Other tensors: torch's."""
    ts = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    ours = [t for t in ts if isinstance(t, OnServers)]
    if not ours:
        return _torch("_get_total_norm", ts, norm_type, error_if_nonfinite, foreach)
    if len(ours) != len(ts):
        raise InvalidArgument("get_total_norm over gradients on zshard's servers and other "
                              "tensors: the servers know only the norm of their own")
    steps = {g.step for g in ours}
    if len(steps) > 1:
        raise InvalidArgument("get_total_norm over gradients of steps %s" % sorted(steps))
    job = _one_job([g.param for g in ours], "get_total_norm")
    if float(norm_type) != 2.0:
        raise InvalidArgument("the servers compute the L2 norm; norm_type=%s is not offered"
                              % (norm_type,))
    job.needs_norm("get_total_norm")
    total = job.grad_norm(ours[0].step)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError("The total norm of order %s for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped." % float(norm_type))
    return torch.tensor(total, dtype=torch.float32)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """As torch's, for a zshard model's parameters: the servers clip this
    step at the optimizer's max_grad_norm by the norm they computed, so
    max_norm must be that and total_norm that norm (get_total_norm's);
    then nothing is left to do here. Other parameters: torch's."""
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    job = _one_job(params, "clip_grads_with_norm_")
    if job is None:
        return _torch("_clip_grads_with_norm_", params, max_norm, total_norm, foreach)
    norm = job.clip(max_norm, 2.0)
    given = float(total_norm)
    if given != float(torch.tensor(norm, dtype=torch.float32)) and given != norm:
        raise InvalidArgument(
            "clip_grads_with_norm_(total_norm=%r): the servers clip step %d by the norm they "
            "computed, %r (get_total_norm over the model's gradients gives it)"
            % (given, job.step, norm))
    return None


# torch's name -> ours
_OURS = {"clip_grad_norm_": clip_grad_norm_, "_get_total_norm": get_total_norm,
         "_clip_grads_with_norm_": clip_grads_with_norm_}
# torch.nn.utils' public names for them
_PUBLIC = {"clip_grad_norm_": "clip_grad_norm_", "_get_total_norm": "get_total_norm",
           "_clip_grads_with_norm_": "clip_grads_with_norm_"}


def _redirect(wrapper, ours):
    """Points torch's no-grad wrapper at ours; False where it is not one."""
    cells = getattr(wrapper, "__closure__", None) or ()
    if len(cells) != 1:
        return False
    inner = cells[0].cell_contents
    if getattr(inner, "_zshard", False):
        return True  # done before
    if getattr(inner, "__name__", None) != getattr(wrapper, "__name__", "?"):
        return False
    _THEIRS[wrapper.__name__] = inner
    cells[0].cell_contents = ours
    return True


def install():
    """Makes torch's clipping functions answer for zshard parameters
    however they were imported (see the module's text)."""
    for name, ours in _OURS.items():
        ours._zshard = True
        wrapper = getattr(_cg, name, None)
        if wrapper is None:  # an older torch (get_total_norm is 2.6's)
            continue
        if _redirect(wrapper, ours):
            continue
        _THEIRS.setdefault(name, wrapper)
        setattr(_cg, name, ours)
        if hasattr(torch.nn.utils, _PUBLIC[name]):
            setattr(torch.nn.utils, _PUBLIC[name], ours)
