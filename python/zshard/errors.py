"""zshard's error space as Python exceptions (include/zshard_status.h).

Every failure of a libzshard call raises the subclass of ZshardError for
its status, carrying the status number (.code), its constant name
(.status) and libzshard's one-line message.
"""


class ZshardError(Exception):
    """A libzshard call failed: .code (int), .status (e.g. "ZS_ENOTFOUND")."""

    code = -1
    status = "ZS_UNKNOWN"

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code
            self.status = _NAMES.get(code, "ZS_UNKNOWN")

    def __str__(self):
        return "%s (%s)" % (self.args[0], self.status)


class InvalidArgument(ZshardError, ValueError):
    code, status = 1, "ZS_EINVAL"


class NotFound(ZshardError, LookupError):
    code, status = 2, "ZS_ENOTFOUND"


class AlreadyExists(ZshardError):
    code, status = 3, "ZS_EEXIST"


class NoSpace(ZshardError):
    code, status = 4, "ZS_ENOSPC"


class Unavailable(ZshardError, ConnectionError):
    code, status = 5, "ZS_EUNAVAIL"


class TimedOut(ZshardError, TimeoutError):
    code, status = 6, "ZS_ETIMEDOUT"


class StorageError(ZshardError, OSError):
    code, status = 7, "ZS_EIO"


class OutOfMemory(ZshardError, MemoryError):
    code, status = 8, "ZS_ENOMEM"


class ProtocolError(ZshardError):
    code, status = 9, "ZS_EPROTO"


class FailedPrecondition(ZshardError):
    code, status = 10, "ZS_ESTATE"


class Canceled(ZshardError):
    """ZS_ECANCELED; from step_begin: the job is stopping (zshardctl job
    stop): close the trainer, nothing is lost."""
    code, status = 11, "ZS_ECANCELED"


class TryAgain(ZshardError):
    code, status = 12, "ZS_EAGAIN"


class InternalError(ZshardError):
    code, status = 13, "ZS_EINTERNAL"


class Resume(ZshardError):
    """ZS_ERESUME: the job rolled back (a process of it was lost, or an
    operator restored it): call Trainer.resume() and go on from its step."""
    code, status = 14, "ZS_ERESUME"


class PermissionDenied(ZshardError):
    """ZS_EPERM: the role the client's certificate names may not do it."""
    code, status = 15, "ZS_EPERM"


_CLASSES = {c.code: c for c in (InvalidArgument, NotFound, AlreadyExists, NoSpace,
                                Unavailable, TimedOut, StorageError, OutOfMemory,
                                ProtocolError, FailedPrecondition, Canceled, TryAgain,
                                InternalError, Resume, PermissionDenied)}
_NAMES = {code: c.status for code, c in _CLASSES.items()}


def error_for(code, message):
    """The exception for status code with message (code 0 is not an error)."""
    cls = _CLASSES.get(code)
    if cls is None:
        return ZshardError(message, code)
    return cls(message)
