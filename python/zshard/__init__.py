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
__version__ = "0.9.0"
