"""zshard: the trainer's side of zshard in Python (bindings of libzshard).

    t = zshard.Trainer.join("job", rank=0, coordinator="HOST:PORT")

See README.md beside this package and include/zshard.h in the source tree
for what each call does; failures raise zshard.ZshardError subclasses.
"""
from zshard.errors import (AlreadyExists, Canceled, FailedPrecondition, InternalError,
                           InvalidArgument, NoSpace, NotFound, OutOfMemory, PermissionDenied,
                           ProtocolError,
                           Resume, StorageError, TimedOut, TryAgain, Unavailable,
                           ZshardError)
from zshard._lib import DEVICE_EMULATED, DEVICE_HOST
from zshard.trainer import (BF16, F16, F32, Op, Trainer, create_job, delete_job, resize_job,
                            strerror)
from zshard.reader import Reader, TensorInfo

__all__ = ["Trainer", "Op", "Reader", "TensorInfo", "create_job", "delete_job", "resize_job", "strerror", "F32", "BF16", "F16", "ZshardError",
           "InvalidArgument", "NotFound", "AlreadyExists", "NoSpace", "Unavailable",
           "TimedOut", "StorageError", "OutOfMemory", "ProtocolError", "FailedPrecondition",
           "Canceled", "TryAgain", "InternalError", "Resume", "PermissionDenied", "DEVICE_HOST",
           "DEVICE_EMULATED"]

def _version():
    """zshard's version: the installed package's, else (a source tree on
    PYTHONPATH) the repository's VERSION file."""
    import os
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "VERSION")
    if os.path.exists(here):
        with open(here) as f:
            return f.read().strip()
    try:
        from importlib.metadata import version
        return version("zshard")
    except Exception:  # neither: say so rather than guess
        return "unknown"


__version__ = _version()
