"""Accelerate (what Hugging Face Trainer runs on) over zshard modules. Two
of its defaults are wrong for a model whose gradients go to the servers:

- Accelerator.clip_grad_norm_ computes the norm from each parameter's
  .grad itself, and a zshard module's parameters have none between
  backward and step: it returned 0 and clipped nothing. Over a zshard
  job's parameters it is zshard.torch's clip_grad_norm_ (the servers'
  norm); other parameters go to Accelerate's own.
- Accelerator.prepare_model wraps the model in DistributedDataParallel
  whenever there is more than one process: DDP would broadcast rank 0's
  parameters into the others' zshard-held ones and all-reduce gradients
  that the servers already reduce. A zshard model is prepared as for
  evaluation (device placement, mixed precision and torch.compile as
  configured, no DDP): the servers are its data parallelism.

install_accelerate() does both, once, where Accelerate is installed;
fully_shard calls it.
"""
import torch

from zshard.torch.clip import clip_grad_norm_
from zshard.torch.job import OWNER


def _zshard_model(model):
    return any(id(p) in OWNER for p in model.parameters())


def install_accelerate():
    try:
        from accelerate import Accelerator
    except ImportError:
        return
    if getattr(Accelerator.clip_grad_norm_, "_zshard", False):
        return
    clip_theirs = Accelerator.clip_grad_norm_
    prepare_theirs = Accelerator.prepare_model

    def accelerate_clip_grad_norm_(self, parameters, max_norm, norm_type=2):
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        if any(id(p) in OWNER for p in params):
            return clip_grad_norm_(params, max_norm, norm_type)
        return clip_theirs(self, params, max_norm, norm_type)

    def accelerate_prepare_model(self, model, device_placement=None, evaluation_mode=False):
        if _zshard_model(model):
            evaluation_mode = True  # no DistributedDataParallel around it
        return prepare_theirs(self, model, device_placement=device_placement,
                              evaluation_mode=evaluation_mode)

    accelerate_clip_grad_norm_._zshard = True
    Accelerator.clip_grad_norm_ = accelerate_clip_grad_norm_
    Accelerator.prepare_model = accelerate_prepare_model
