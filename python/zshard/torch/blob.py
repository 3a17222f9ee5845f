"""Checkpoint blobs: a rank's RNG states and whatever else it keeps (the
data loader's position, the scheduler), as bytes for zshard_checkpoint."""
import pickle
from typing import Any
import random

import numpy as np
import torch


def rng_blob(extra: Any = None) -> bytes:
    """This process's RNG states (torch, numpy, random) and extra (any
    picklable object: the data loader's position), as a checkpoint blob."""
    return pickle.dumps({"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                         "random": random.getstate(), "extra": extra})


def load_rng_blob(blob: bytes) -> Any:
    """Restores what rng_blob saved; returns its extra."""
    d = pickle.loads(blob)
    torch.set_rng_state(d["torch"])
    np.random.set_state(d["numpy"])
    random.setstate(d["random"])
    return d["extra"]
