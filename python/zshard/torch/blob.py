"""Checkpoint blobs: a rank's RNG states and whatever else it keeps (the
data loader's position, the scheduler), as bytes for zshard_checkpoint; and
the frame zshard.torch puts around every blob it checkpoints, which carries
the model's persistent buffers (a BatchNorm's running statistics, ...):
they live in the trainers, not on the servers, so each checkpoint records
them beside its parameters, a resume puts them back, and zshardctl export
--bare-names writes rank 0's into the exported file.

The frame: b"ZSB1", the length of what follows as 8 little-endian bytes, a
safetensors file of the buffers (by state_dict name), then the caller's
blob."""
import json
import pickle
import random
import struct
from typing import Any, Dict

import numpy as np
import torch

from zshard.errors import FailedPrecondition

MAGIC = b"ZSB1"
_DT = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
       torch.float64: "F64", torch.int64: "I64", torch.int32: "I32", torch.int16: "I16",
       torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
_TD = {v: k for k, v in _DT.items()}


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


def persistent_buffers(module: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """The module's persistent buffers (those its state_dict holds), by
    state_dict name."""
    out = {}
    for prefix, m in module.named_modules():
        for n, b in m._buffers.items():
            if b is not None and n not in m._non_persistent_buffers_set:
                out[prefix + "." + n if prefix else n] = b
    return out


def _safetensors(tensors: Dict[str, torch.Tensor]) -> bytes:
    header, data, off = {}, [], 0
    for name, t in tensors.items():
        if t.dtype not in _DT:
            raise FailedPrecondition("buffer %s has dtype %s, which a checkpoint cannot record"
                                     % (name, t.dtype))
        raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        data.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(data)


def _load_safetensors(b: bytes) -> Dict[str, torch.Tensor]:
    n = struct.unpack_from("<Q", b, 0)[0]
    header = json.loads(b[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        raw = np.frombuffer(b, dtype=np.uint8, count=hi - lo, offset=8 + n + lo).copy()
        out[name] = torch.from_numpy(raw).view(_TD[e["dtype"]]).reshape(e["shape"])
    return out


def frame(module: torch.nn.Module, blob: bytes) -> bytes:
    """blob framed with module's persistent buffers."""
    st = _safetensors(persistent_buffers(module))
    return MAGIC + struct.pack("<Q", len(st)) + st + bytes(blob)


def unframe(module: torch.nn.Module, blob: bytes) -> bytes:
    """Puts the buffers a framed blob holds back into module and returns the
    caller's blob (a blob without the frame, from before: as it is). The
    buffers must be module's own, by name and shape."""
    if not blob.startswith(MAGIC):
        return blob
    n = struct.unpack_from("<Q", blob, 4)[0]
    got = _load_safetensors(blob[12:12 + n])
    have = persistent_buffers(module)
    if set(got) != set(have):
        raise FailedPrecondition(
            "the checkpoint's buffers are not this model's: only in the checkpoint: %s; only "
            "in the model: %s" % (", ".join(sorted(set(got) - set(have))) or "none",
                                  ", ".join(sorted(set(have) - set(got))) or "none"))
    with torch.no_grad():
        for k, v in got.items():
            if tuple(v.shape) != tuple(have[k].shape) or v.dtype != have[k].dtype:
                raise FailedPrecondition("the checkpoint's buffer %s is %s %s, the model's %s %s"
                                         % (k, v.dtype, tuple(v.shape), have[k].dtype,
                                            tuple(have[k].shape)))
        for k, v in got.items():
            have[k].copy_(v)
    return blob[12 + n:]
