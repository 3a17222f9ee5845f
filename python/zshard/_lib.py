"""Loads libzshard.so.0 and declares the C API (include/zshard.h) to ctypes.

The library is $ZSHARD_LIB if set, else the one a wheel carries
(zshard/_native), else the one of the build tree this package sits in
(build/lib, or $ZSHARD_BUILD/lib), else the installed one.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, Structure, c_char_p, c_double, c_int, c_uint,
                    c_ulonglong, c_void_p, c_size_t)


class Policy(Structure):
    """struct zs_policy"""
    _fields_ = [("prefetch", c_uint), ("max_live_bytes", c_ulonglong),
                ("reshard_after_forward", c_int), ("push_depth", c_uint),
                ("op_timeout_ms", c_int)]


class Counters(Structure):
    """struct zs_trainer_counters"""
    _fields_ = [("bytes_gathered", c_ulonglong), ("bytes_pushed", c_ulonglong),
                ("gathers", c_ulonglong), ("pushes", c_ulonglong),
                ("wait_seconds", c_double),
                ("live_param_bytes", c_ulonglong), ("peak_param_bytes", c_ulonglong),
                ("live_grad_bytes", c_ulonglong), ("peak_grad_bytes", c_ulonglong),
                ("bytes_pushed_device", c_ulonglong)]


class StepStats(Structure):
    """struct zs_step_stats"""
    _fields_ = [("step", c_ulonglong), ("stage", c_uint), ("prefetch", c_uint),
                ("seconds", c_double), ("compute_seconds", c_double),
                ("gather_wait_seconds", c_double), ("push_wait_seconds", c_double),
                ("control_seconds", c_double),
                ("bytes_gathered", c_ulonglong), ("bytes_pushed", c_ulonglong),
                ("peak_param_bytes", c_ulonglong), ("peak_grad_bytes", c_ulonglong),
                ("rss_peak_bytes", c_ulonglong)]


class HParams(Structure):
    """struct zs_hparams"""
    _fields_ = [("lr", c_double), ("weight_decay", c_double), ("beta1", c_double),
                ("beta2", c_double), ("eps", c_double), ("momentum", c_double)]


class ReaderStats(Structure):
    """struct zs_reader_stats"""
    _fields_ = [("id", c_ulonglong), ("parent", c_ulonglong),
                ("bytes_from_servers", c_ulonglong), ("bytes_from_relay", c_ulonglong),
                ("bytes_served", c_ulonglong), ("bytes_from_relay_rdma", c_ulonglong),
                ("bytes_from_servers_one_sided", c_ulonglong)]


def _candidates():
    env = os.environ.get("ZSHARD_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    native = os.path.join(here, "_native", "libzshard.so.0")  # a wheel's
    if os.path.exists(native):
        yield native
        return
    build = os.environ.get("ZSHARD_BUILD", os.path.join(here, "..", "..", "build"))
    yield os.path.join(build, "lib", "libzshard.so.0")
    found = ctypes.util.find_library("zshard")
    if found:
        yield found
    yield "libzshard.so.0"


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("cannot load libzshard (set ZSHARD_LIB to libzshard.so.0): " +
                      "; ".join(errors))


lib = _load()

_T = c_void_p  # zs_trainer *
_OP = c_void_p  # zs_op *
_SIGS = {
    "zs_strerror": (c_char_p, [c_int]),
    "zs_trainer_join": (c_int, [c_char_p, c_char_p, c_uint, c_char_p, c_int, POINTER(_T),
                                c_char_p, c_size_t]),
    "zs_create_job": (c_int, [c_char_p, c_char_p, c_int, c_char_p, c_size_t]),
    "zs_delete_job": (c_int, [c_char_p, c_char_p, c_int, c_int, c_char_p, c_size_t]),
    "zs_resize_job": (c_int, [c_char_p, c_char_p, c_uint, c_int, POINTER(c_ulonglong), c_char_p,
                              c_size_t]),
    "zs_trainer_close": (None, [_T]),
    "zs_trainer_error": (c_char_p, [_T]),
    "zs_trainer_rank": (c_uint, [_T]),
    "zs_trainer_world_size": (c_uint, [_T]),
    "zs_trainer_stage": (c_uint, [_T]),
    "zs_trainer_refresh": (c_int, [_T]),
    "zs_trainer_units": (c_uint, [_T]),
    "zs_unit_name": (c_char_p, [_T, c_uint]),
    "zs_unit_numel": (c_ulonglong, [_T, c_uint]),
    "zs_unit_dtype": (c_int, [_T, c_uint]),
    "zs_unit_tensors": (c_uint, [_T, c_uint]),
    "zs_unit_tensor_frozen": (c_int, [_T, c_uint, c_uint]),
    "zs_unit_tensor": (c_int, [_T, c_uint, c_uint, POINTER(c_char_p), POINTER(c_ulonglong),
                               POINTER(c_uint), POINTER(c_ulonglong), c_uint]),
    "zs_init_unit": (c_int, [_T, c_uint, c_void_p]),
    "zs_init_unit_state": (c_int, [_T, c_uint, c_uint, c_void_p]),
    "zs_gather": (c_int, [_T, c_uint, c_ulonglong, c_void_p, POINTER(_OP)]),
    "zs_push": (c_int, [_T, c_uint, c_ulonglong, c_void_p, POINTER(_OP)]),
    "zs_push_partial": (c_int, [_T, c_uint, c_ulonglong, c_void_p, POINTER(_OP)]),
    "zs_op_test": (c_int, [_OP]),
    "zs_op_wait": (c_int, [_OP, c_int]),
    "zs_trainer_set_policy": (c_int, [_T, POINTER(Policy)]),
    "zs_trainer_set_device": (c_int, [_T, c_int, c_void_p]),
    "zs_trainer_groups": (c_uint, [_T]),
    "zs_trainer_hparams": (c_int, [_T, c_uint, POINTER(HParams), POINTER(c_double)]),
    "zs_set_hparams": (c_int, [_T, c_ulonglong, POINTER(HParams), c_uint, c_double]),
    "zs_step_grad_norm": (c_int, [_T, c_ulonglong, c_int, POINTER(c_double)]),
    "zs_step_begin": (c_int, [_T, c_ulonglong]),
    "zs_unit_params": (c_int, [_T, c_uint, c_int, POINTER(c_void_p)]),
    "zs_unit_forward_done": (c_int, [_T, c_uint]),
    "zs_unit_grad": (c_int, [_T, c_uint, POINTER(c_void_p)]),
    "zs_unit_push": (c_int, [_T, c_uint]),
    "zs_step_end": (c_int, [_T]),
    "zs_checkpoint": (c_int, [_T, c_ulonglong, c_void_p, c_uint, POINTER(c_ulonglong)]),
    "zs_checkpoint_wait": (c_int, [_T, c_ulonglong, c_int]),
    "zs_trainer_resume": (c_int, [_T, POINTER(c_ulonglong), c_void_p, c_uint,
                                  POINTER(c_uint)]),
    "zs_trainer_resumed_from": (c_int, [_T, POINTER(c_ulonglong)]),
    "zs_set_step_state": (c_int, [_T, c_ulonglong, c_void_p, c_uint]),
    "zs_trainer_counters": (None, [_T, POINTER(Counters)]),
    "zs_last_step": (c_int, [_T, POINTER(StepStats)]),
    # include/zshard_reader.h
    "zs_reader_open": (c_int, [c_char_p, c_char_p, c_int, POINTER(c_void_p), c_char_p,
                               c_size_t]),
    "zs_reader_close": (None, [c_void_p]),
    "zs_reader_error": (c_char_p, [c_void_p]),
    "zs_reader_latest": (c_int, [c_void_p, POINTER(c_ulonglong)]),
    "zs_reader_wait": (c_int, [c_void_p, c_ulonglong, c_int, POINTER(c_ulonglong)]),
    "zs_reader_pin": (c_int, [c_void_p, c_ulonglong, POINTER(c_ulonglong)]),
    "zs_reader_release": (c_int, [c_void_p]),
    "zs_reader_checkpoints": (c_int, [c_void_p, POINTER(c_ulonglong), POINTER(c_ulonglong), c_uint,
                                      POINTER(c_uint)]),
    "zs_reader_wait_checkpoint": (c_int, [c_void_p, c_ulonglong, c_int, POINTER(c_ulonglong),
                                          POINTER(c_ulonglong)]),
    "zs_reader_pin_checkpoint": (c_int, [c_void_p, c_ulonglong, POINTER(c_ulonglong)]),
    "zs_reader_tensors": (c_uint, [c_void_p]),
    "zs_reader_tensor": (c_int, [c_void_p, c_uint, POINTER(c_char_p), POINTER(c_int),
                                 POINTER(c_uint), POINTER(c_ulonglong), c_uint,
                                 POINTER(c_ulonglong)]),
    "zs_reader_find": (c_int, [c_void_p, c_char_p, POINTER(c_uint)]),
    "zs_reader_relay": (c_int, [c_void_p, c_char_p, c_uint]),
    "zs_reader_relay_addr": (c_char_p, [c_void_p]),
    "zs_reader_stats": (None, [c_void_p, POINTER(ReaderStats)]),
    "zs_reader_read": (c_int, [c_void_p, c_char_p, c_int, c_void_p, c_size_t, POINTER(c_uint)]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

DEVICE_HOST = -1       # ZS_DEVICE_HOST
DEVICE_EMULATED = -2   # ZS_DEVICE_EMULATED

ERRLEN = 512
errbuf = lambda: ctypes.create_string_buffer(ERRLEN)  # noqa: E731
