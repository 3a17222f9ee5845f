"""What a zshard parameter's .grad is once its gradient went to the servers.

A unit's gradient is pushed during the backward pass and summed over every
rank on the shard servers, where the optimizer (and the clipping) runs.
Leaving .grad None would let code that reads it (torch's clip_grad_norm_
bound before zshard.torch was imported, get_total_norm, a logger of
gradient norms) take the gradient for zero: a norm of 0.0, nothing
clipped, nothing said. So from its push until zero_grad() or the next
forward, each trained parameter's .grad is an OnServers: a tensor of the
gradient's shape, dtype and device that holds no data and raises, naming
the parameter and what to call instead, on anything but its metadata.
zshard.torch's clipping functions (clip.py) recognise it and answer for
the gradients it stands for.
"""
import torch

from zshard.errors import FailedPrecondition

# what may be asked of it without its values
_META = {torch.Tensor.size, torch.Tensor.dim, torch.Tensor.numel, torch.Tensor.__repr__,
         torch.Tensor.__format__, torch.Tensor.element_size, torch.Tensor.is_floating_point,
         torch.Tensor.is_complex, torch.Tensor.ndimension, torch.Tensor.nelement}
_META_PROPS = ("shape", "dtype", "device", "requires_grad", "is_leaf", "layout", "ndim",
               "is_cuda", "is_sparse", "is_quantized", "is_meta", "grad_fn", "names")
for _p in _META_PROPS:
    _g = getattr(torch.Tensor, _p, None)
    if _g is not None and hasattr(_g, "__get__"):
        _META.add(_g.__get__)


class OnServers(torch.Tensor):
    """The gradient of parameter `name` of a zshard job, step `step`: on
    the servers (see the module's text). .job, .param, .step say whose."""

    @staticmethod
    def __new__(cls, param, name, job, step):
        # the parameter's shape as it is (torch wants the same; at stage 3
        # its data is empty between its uses, and so is this)
        t = torch.Tensor._make_wrapper_subclass(cls, param.shape, dtype=param.dtype,
                                                device=param.device, requires_grad=False)
        t.param, t.pname, t.job, t.step = param, name, job, step
        return t

    def __repr__(self, *args, **kwargs):
        return ("OnServers(%s, shape=%s, dtype=%s: the gradient of step %d, summed over every "
                "rank on zshard's servers)" % (self.pname, list(self.shape), self.dtype,
                                               self.step))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in _META:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))
        raise refusal(_first(args, kwargs), getattr(func, "__name__", str(func)))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # what reaches the kernels without a Python call (autograd adding
        # into a .grad left from the step before)
        raise refusal(_first(args, kwargs), str(func))


def _first(args, kwargs):
    for a in list(args) + list((kwargs or {}).values()):
        if isinstance(a, OnServers):
            return a
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, OnServers):
                    return b
    return None


def refusal(g, what):
    who = "'%s' (step %d)" % (g.pname, g.step) if g is not None else "a zshard parameter"
    return FailedPrecondition(
        "%s: the gradient of %s is on zshard's servers (pushed during backward and summed "
        "over every rank there; the optimizer and the clipping run there): torch has none of "
        "its values. torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) and "
        "get_total_norm over every .grad of the model give the servers' global norm (the "
        "optimizer's max_grad_norm clips); optimizer.last_grad_norm gives the last step's"
        % (what, who))


def mark(job, u, step):
    """Unit u's trained parameters' .grad: OnServers of step."""
    for n, p in u.params:
        if p.requires_grad:
            p.grad = OnServers(p, n, job, step)


def is_marked(p):
    return isinstance(p.grad, OnServers)
