"""Hugging Face models through zshard.torch: save_pretrained writes the
trained parameters of a fully_shard'ed transformers model as the directory
from_pretrained loads (config.json, safetensors shards and their index),
by transformers' own save_pretrained."""
import os

import torch

from zshard.errors import InvalidArgument


def save_pretrained(model: torch.nn.Module, save_directory: str, **kwargs) -> None:
    """model.save_pretrained(save_directory, **kwargs) with the job's
    trained parameters (the last completed step's, gathered from the
    servers: model.state_dict()) instead of whatever the module holds
    between steps; kwargs as transformers takes them (max_shard_size,
    ...). Between steps; any one rank calls it (rank 0, usually)."""
    if not hasattr(model, "save_pretrained") or not hasattr(model, "config"):
        raise InvalidArgument("save_pretrained needs a transformers model (a PreTrainedModel: "
                              "%s is not one)" % type(model).__name__)
    if not hasattr(model, "_zshard"):
        raise InvalidArgument("save_pretrained: %s is not fully_shard'ed (its root)"
                              % type(model).__name__)
    os.makedirs(save_directory, exist_ok=True)
    model.save_pretrained(save_directory, state_dict=model.state_dict(), **kwargs)
