# SPDX-License-Identifier: Apache-2.0
"""The C ABI of librecap as ctypes sees it: constants, structures, callback types and the
declarations of the functions the package calls. Every name here is checked against
include/recap.h by python/tests/unit/test_abi.py, so nothing copied by hand can drift."""
import ctypes

c_status = ctypes.c_int
vp = ctypes.c_void_p
u8p = ctypes.POINTER(ctypes.c_uint8)

# ------------------------------------------------------------------ constants (recap.h)

# The ABI this package's declarations (DECLS) were written for: a librecap of the same major and
# at least this minor has every function in DECLS (minors only add).
ABI_NEEDED = (1, 6)

RECAP_OK = 0
STATUS_NAMES = {
    0: "RECAP_OK",
    -1: "RECAP_ERR_INVALID_ARG",
    -2: "RECAP_ERR_NO_MEMORY",
    -3: "RECAP_ERR_NO_DRIVER",
    -4: "RECAP_ERR_NO_DEVICE",
    -5: "RECAP_ERR_WRONG_DEVICE",
    -6: "RECAP_ERR_CUDA",
    -7: "RECAP_ERR_MISALIGNED",
    -8: "RECAP_ERR_NOT_FOUND",
    -9: "RECAP_ERR_EXISTS",
    -10: "RECAP_ERR_DUPLICATE_SEED",
    -11: "RECAP_ERR_STATE",
    -12: "RECAP_ERR_NOT_REGISTERED",
    -13: "RECAP_ERR_CORRUPT",
    -14: "RECAP_ERR_VERSION",
    -15: "RECAP_ERR_OPTIONS_DIFFER",
    -16: "RECAP_ERR_UNSUPPORTED",
    -17: "RECAP_ERR_BUSY",
}
RECAP_ERR_INVALID_ARG = -1
RECAP_ERR_STATE = -11
RECAP_ERR_NOT_FOUND = -8
RECAP_ERR_MISALIGNED = -7
RECAP_ERR_UNSUPPORTED = -16

RECAP_DEVICE_HOST = -1
RECAP_STATE_BYTES = 16
RECAP_NAME_MAX = 127
RECAP_TRACKER_GRAPH_SAFE = 1
RECAP_TRACKER_INFERENCE = 2
RECAP_FRAMEWORK_OPS_VERSION = 1

RECAP_RNG_DEFAULT = "default-rng"
RECAP_RNG_MODEL_PARALLEL = "model-parallel-rng"
RECAP_RNG_EXPERT_PARALLEL = "expert-parallel-rng"
RECAP_RNG_DATA_PARALLEL = "data-parallel-rng"
RECAP_RNG_GTP_REMAT = "gtp-remat-rng"
RECAP_RNG_EGTP_REMAT = "egtp-remat-rng"

RECAP_EVENT_CAPTURE_WILL_BEGIN = 0
RECAP_EVENT_CAPTURE_ENDED = 1
RECAP_EVENT_GRAPH_INSTANTIATED = 2
RECAP_EVENT_GRAPH_WILL_LAUNCH = 3
RECAP_EVENT_GRAPH_DESTROYED = 4
RECAP_EVENT_GRAPH_EXEC_DESTROYED = 5
RECAP_EVENT_MASK_ALL = 0x3F

RECAP_HOOKS_NONE = 0
RECAP_HOOKS_PRELOAD = 1
RECAP_HOOKS_CUPTI = 2
RECAP_HOOKS_INJECTION = 3

RECAP_LOG_WARN = 1
RECAP_LOG_INFO = 2
RECAP_LOG_DEBUG = 3
RECAP_LOG_WARN_UNLESS_OFF = 4

# ------------------------------------------------------------------ callbacks and structures

GetStateFn = ctypes.CFUNCTYPE(c_status, vp, u8p)
SetStateFn = ctypes.CFUNCTYPE(c_status, vp, u8p)
StateCreateFn = ctypes.CFUNCTYPE(c_status, vp, ctypes.c_uint64, ctypes.POINTER(vp))
StateCloneFn = ctypes.CFUNCTYPE(c_status, vp, vp, ctypes.POINTER(vp))
StateInstallFn = ctypes.CFUNCTYPE(c_status, vp, vp)
StateCurrentFn = ctypes.CFUNCTYPE(c_status, vp, ctypes.POINTER(vp))
StateGetFn = ctypes.CFUNCTYPE(c_status, vp, vp, u8p)
StateSetFn = ctypes.CFUNCTYPE(c_status, vp, vp, u8p)
StateReleaseFn = ctypes.CFUNCTYPE(None, vp, vp)
StateRetainFn = ctypes.CFUNCTYPE(c_status, vp, vp)
NeedsRegistrationFn = ctypes.CFUNCTYPE(c_status, vp, ctypes.POINTER(ctypes.c_int))


class FrameworkOps(ctypes.Structure):
    """recap_framework_ops_t"""
    _fields_ = [("version", ctypes.c_uint), ("name", ctypes.c_char_p),
                ("get_state", GetStateFn), ("set_state", SetStateFn),
                ("state_create", StateCreateFn), ("state_clone", StateCloneFn),
                ("state_install", StateInstallFn), ("state_current", StateCurrentFn),
                ("state_get", StateGetFn), ("state_set", StateSetFn),
                ("state_release", StateReleaseFn), ("state_retain", StateRetainFn),
                ("needs_registration", NeedsRegistrationFn)]


class FrameworkInfo(ctypes.Structure):
    """recap_framework_info_t"""
    _fields_ = [("name", ctypes.c_char * 64), ("device", ctypes.c_int),
                ("graph_safe", ctypes.c_int), ("trackers", ctypes.c_int)]


class CaptureEventInfo(ctypes.Structure):
    """recap_capture_event_info_t"""
    _fields_ = [("event", ctypes.c_int), ("source", ctypes.c_int), ("stream", vp),
                ("mode", ctypes.c_int), ("graph", vp), ("exec", vp)]


SubscriberFn = ctypes.CFUNCTYPE(c_status, ctypes.POINTER(CaptureEventInfo), vp)


class TrackerParams(ctypes.Structure):
    """recap_tracker_params_t"""
    _fields_ = [("flags", ctypes.c_uint32), ("generator", vp), ("device", ctypes.c_int),
                ("host_generator", vp)]


class ParallelRanks(ctypes.Structure):
    """recap_parallel_ranks_t"""
    _fields_ = [("tp_rank", ctypes.c_int), ("tp_size", ctypes.c_int),
                ("ep_rank", ctypes.c_int), ("ep_size", ctypes.c_int),
                ("etp_rank", ctypes.c_int), ("etp_size", ctypes.c_int),
                ("gtp_remat_rank", ctypes.c_int), ("gtp_remat_size", ctypes.c_int),
                ("egtp_remat_rank", ctypes.c_int), ("egtp_remat_size", ctypes.c_int)]


class CaptureStats(ctypes.Structure):
    """recap_capture_stats_t"""
    _fields_ = [("captures", ctypes.c_uint64), ("graphs_with_rng", ctypes.c_uint64),
                ("launches", ctypes.c_uint64), ("slot_writes", ctypes.c_uint64),
                ("states_primed", ctypes.c_uint64), ("live_records", ctypes.c_uint64)]


class PhiloxArgs(ctypes.Structure):
    """recap_philox_args_t (include/recap/philox.h)"""
    _fields_ = [("seed", ctypes.c_uint64), ("offset", ctypes.c_uint64),
                ("seed_ptr", vp), ("offset_ptr", vp),
                ("offset_intragraph", ctypes.c_uint64),
                ("captured", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


# Structures checked field by field against the header.
STRUCTS = {
    "recap_framework_ops_t": FrameworkOps,
    "recap_capture_event_info_t": CaptureEventInfo,
    "recap_tracker_params_t": TrackerParams,
    "recap_parallel_ranks_t": ParallelRanks,
    "recap_capture_stats_t": CaptureStats,
    "recap_philox_args_t": PhiloxArgs,
}

# ------------------------------------------------------------------ functions: (argtypes, restype)

_S = c_status
P = ctypes.POINTER
DECLS = {
    "recap_abi_version": ([], ctypes.c_int),
    "recap_version_string": ([], ctypes.c_char_p),
    "recap_strerror": ([ctypes.c_int], ctypes.c_char_p),
    "recap_last_error": ([], ctypes.c_char_p),
    "recap_log_write": ([ctypes.c_int, ctypes.c_char_p], _S),
    "recap_device_count": ([P(ctypes.c_int)], _S),
    "recap_generator_create": ([ctypes.c_int, P(vp)], _S),
    "recap_generator_destroy": ([vp], _S),
    "recap_generator_manual_seed": ([vp, ctypes.c_uint64], _S),
    "recap_generator_get_state": ([vp, u8p], _S),
    "recap_generator_set_state": ([vp, u8p], _S),
    "recap_generator_reserve": ([vp, vp, ctypes.c_uint64, P(PhiloxArgs)], _S),
    "recap_generator_create_framework": ([P(FrameworkOps), vp, ctypes.c_int, P(vp)], _S),
    "recap_framework_generators": ([P(FrameworkInfo), ctypes.c_size_t, P(ctypes.c_size_t)], _S),
    "recap_generator_is_framework": ([vp, P(ctypes.c_int)], _S),
    "recap_generator_needs_registration": ([vp, P(ctypes.c_int)], _S),
    "recap_capture_needs_registration": ([P(ctypes.c_int)], _S),
    "recap_capture_stats": ([P(CaptureStats)], _S),
    "recap_capture_subscribe": ([ctypes.c_uint32, SubscriberFn, vp, P(vp)], _S),
    "recap_capture_unsubscribe": ([vp], _S),
    "recap_capture_subscription_stats": ([vp, P(ctypes.c_uint64), P(ctypes.c_uint64)], _S),
    "recap_hooks_active": ([P(ctypes.c_int)], _S),
    "recap_hooks_name": ([ctypes.c_int], ctypes.c_char_p),
    "recap_tracker_create": ([P(TrackerParams), P(vp)], _S),
    "recap_tracker_destroy": ([vp], _S),
    "recap_tracker_reset": ([vp], _S),
    "recap_tracker_is_initialized": ([vp, P(ctypes.c_int)], _S),
    "recap_tracker_add": ([vp, ctypes.c_char_p, ctypes.c_uint64], _S),
    "recap_tracker_fork": ([vp, ctypes.c_char_p, P(ctypes.c_uint64)], _S),
    "recap_tracker_unfork": ([vp, ctypes.c_uint64], _S),
    "recap_tracker_current_name": ([vp, P(ctypes.c_char_p)], _S),
    "recap_tracker_generator": ([vp, P(vp)], _S),
    "recap_tracker_get_states": ([vp, P(vp)], _S),
    "recap_tracker_set_states": ([vp, vp], _S),
    "recap_tracker_state_object": ([vp, ctypes.c_char_p, P(vp)], _S),
    "recap_tracker_seed_parallel": ([vp, ctypes.c_int64, P(ParallelRanks)], _S),
    "recap_states_create": ([P(vp)], _S),
    "recap_states_put": ([vp, ctypes.c_char_p, u8p], _S),
    "recap_states_free": ([vp], _S),
    "recap_states_count": ([vp, P(ctypes.c_size_t)], _S),
    "recap_states_name": ([vp, ctypes.c_size_t, P(ctypes.c_char_p)], _S),
    "recap_states_lookup": ([vp, ctypes.c_char_p, u8p], _S),
    "recap_exact_capture_enter": ([P(vp)], _S),
    "recap_exact_capture_leave": ([vp], _S),
    "recap_snapshot_create": ([P(vp)], _S),
    "recap_snapshot_destroy": ([vp], _S),
    "recap_snapshot_take": ([vp, vp], _S),
    "recap_snapshot_restore": ([vp, vp], _S),
    "recap_snapshot_serialize": ([vp, vp, ctypes.c_size_t, P(ctypes.c_size_t)], _S),
    "recap_snapshot_deserialize": ([vp, ctypes.c_size_t, vp], _S),
}
