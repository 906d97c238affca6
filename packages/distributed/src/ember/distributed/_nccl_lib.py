"""NVIDIA's NCCL library, bound with ctypes: loading, prototypes, enums, errors.

The library comes from the ``nvidia-nccl-cu13`` (or ``-cu12``) wheel: ``libnccl.so.2`` in its
``nvidia/nccl/lib`` folder, found through the installed distribution's file list or the
``nvidia.nccl`` package path (``EMBER_NCCL_LIBRARY`` names a file explicitly). Nothing here runs
at import time: CPU installs never load CUDA or NCCL. Communicators are created non-blocking
(``ncclConfig_t.blocking = 0``) so a stuck initialization or collective can be aborted with
``ncclCommAbort`` from the watchdog instead of hanging the caller.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading

from ._errors import DistBackendError

# ncclResult_t
SUCCESS, UNHANDLED_CUDA, SYSTEM, INTERNAL, INVALID_ARGUMENT, INVALID_USAGE, REMOTE, IN_PROGRESS = range(8)
# ncclRedOp_t
SUM, PROD, MAX, MIN, AVG = range(5)
# ncclDataType_t
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)
FLOAT8E4M3, FLOAT8E5M2 = 10, 11
# ncclScalarResidence_t
SCALAR_DEVICE, SCALAR_HOST_IMMEDIATE = 0, 1

_CONFIG_MAGIC = 0xCAFEBEEF
_UNDEF_INT = -(2 ** 31)  # NCCL_CONFIG_UNDEF_INT: "use NCCL's default"
_DISTRIBUTIONS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")


class UniqueId(ctypes.Structure):
    """``ncclUniqueId``: 128 opaque bytes, made by one rank and handed to the others."""

    _fields_ = [("internal", ctypes.c_char * 128)]


class Config(ctypes.Structure):
    """The leading fields of ``ncclConfig_t`` (NCCL copies ``size`` bytes and fills the rest with
    its defaults). ``version`` 2.14 makes NCCL ignore the fields newer releases added after
    ``blocking``, so this short layout stays valid for every 2.x library."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("blocking", ctypes.c_int),
        ("cgaClusterSize", ctypes.c_int),
        ("minCTAs", ctypes.c_int),
        ("maxCTAs", ctypes.c_int),
        ("netName", ctypes.c_char_p),
        ("splitShare", ctypes.c_int),
    ]


def nonblocking_config() -> Config:
    c = Config()
    c.size = ctypes.sizeof(Config)
    c.magic = _CONFIG_MAGIC
    c.version = 2 * 10000 + 14 * 100  # NCCL_VERSION(2, 14, 0)
    c.blocking = 0
    c.cgaClusterSize = c.minCTAs = c.maxCTAs = c.splitShare = _UNDEF_INT
    c.netName = None
    return c


_LIB: list = []
_LOCK = threading.Lock()


def _candidates() -> list[str]:
    paths = []
    explicit = os.environ.get("EMBER_NCCL_LIBRARY")
    if explicit:
        paths.append(explicit)
    try:
        from importlib import metadata

        for dist in _DISTRIBUTIONS:
            try:
                files = metadata.files(dist) or []
            except metadata.PackageNotFoundError:
                continue
            for f in files:
                if f.name.startswith("libnccl.so"):
                    paths.append(str(f.locate()))
    except Exception:  # noqa: BLE001, S110 - a broken metadata install: try the package path
        pass
    try:
        import nvidia.nccl as pkg  # the wheel's namespace package

        for folder in list(pkg.__path__):
            paths += sorted(glob.glob(os.path.join(folder, "lib", "libnccl.so*")))
    except ImportError:
        pass
    return paths


def find_library() -> str | None:
    """The path of the NCCL library that would be loaded, without loading it."""
    for path in _candidates():
        if os.path.exists(path):
            return path
    return None


def lib() -> ctypes.CDLL:
    """The loaded library with its prototypes set (loaded once per process)."""
    if _LIB:
        return _LIB[0]
    with _LOCK:
        if _LIB:
            return _LIB[0]
        path = find_library()
        try:
            handle = ctypes.CDLL(path or "libnccl.so.2", mode=ctypes.RTLD_GLOBAL)
        except OSError as err:
            raise RuntimeError(
                "Distributed package doesn't have NCCL built in: libnccl.so.2 was not found "
                "(install the nvidia-nccl-cu13 wheel, or set EMBER_NCCL_LIBRARY)"
            ) from err
        _prototypes(handle)
        _LIB.append(handle)
        return handle


def _prototypes(h: ctypes.CDLL) -> None:
    vp, i32, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    comm_p = ctypes.POINTER(vp)
    protos = {
        "ncclGetVersion": [ctypes.POINTER(i32)],
        "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
        "ncclCommInitRankConfig": [comm_p, i32, UniqueId, i32, ctypes.POINTER(Config)],
        "ncclCommGetAsyncError": [vp, ctypes.POINTER(i32)],
        "ncclCommAbort": [vp],
        "ncclCommDestroy": [vp],
        "ncclCommFinalize": [vp],
        "ncclAllReduce": [vp, vp, sz, i32, i32, vp, vp],
        "ncclBroadcast": [vp, vp, sz, i32, i32, vp, vp],
        "ncclReduce": [vp, vp, sz, i32, i32, i32, vp, vp],
        "ncclAllGather": [vp, vp, sz, i32, vp, vp],
        "ncclReduceScatter": [vp, vp, sz, i32, i32, vp, vp],
        "ncclSend": [vp, sz, i32, i32, vp, vp],
        "ncclRecv": [vp, sz, i32, i32, vp, vp],
        "ncclGroupStart": [],
        "ncclGroupEnd": [],
        "ncclRedOpCreatePreMulSum": [ctypes.POINTER(i32), vp, i32, i32, vp],
        "ncclRedOpDestroy": [i32, vp],
    }
    for name, args in protos.items():
        fn = getattr(h, name)
        fn.argtypes = args
        fn.restype = i32
    h.ncclGetErrorString.argtypes = [i32]
    h.ncclGetErrorString.restype = ctypes.c_char_p
    if hasattr(h, "ncclGetLastError"):
        h.ncclGetLastError.argtypes = [vp]
        h.ncclGetLastError.restype = ctypes.c_char_p


def version() -> tuple[int, int, int]:
    """``(major, minor, patch)`` of the loaded library (``torch.cuda.nccl.version()``)."""
    v = ctypes.c_int(0)
    check(lib().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    code = v.value
    return (code // 10000, (code % 10000) // 100, code % 100)


def error_text(result: int, comm=None) -> str:
    h = lib()
    text = h.ncclGetErrorString(int(result)).decode(errors="replace")
    if hasattr(h, "ncclGetLastError"):
        last = h.ncclGetLastError(comm)
        if last:
            text += f" (last error: {last.decode(errors='replace').strip()})"
    return text


def check(result: int, what: str, comm=None) -> int:
    """Raises ``DistBackendError`` for an NCCL error; returns ``SUCCESS`` or ``IN_PROGRESS``."""
    if result in (SUCCESS, IN_PROGRESS):
        return result
    raise DistBackendError(f"NCCL error in {what}: {error_text(result, comm)}")


def unique_id() -> bytes:
    uid = UniqueId()
    check(lib().ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    return ctypes.string_at(ctypes.addressof(uid), 128)


def unique_id_from(raw: bytes) -> UniqueId:
    if len(raw) != 128:
        raise DistBackendError(f"malformed NCCL unique id ({len(raw)} bytes, expected 128)")
    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), raw, 128)
    return uid
