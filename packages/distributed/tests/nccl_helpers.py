"""What the NCCL tests share: whether a GPU and NCCL are here, and the skip reasons."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off on shared hosts


def gpu_count() -> int:
    try:
        import ember

        return ember.cuda.device_count() if ember.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no driver, no plugin: no GPU
        return 0


def nccl_here() -> bool:
    import ember.distributed as dist

    return dist.is_nccl_available()


def need_gpus(n: int):
    """A skip mark unless ``n`` CUDA devices and the NCCL library are present."""
    count = gpu_count()
    if count < n:
        what = "no CUDA device" if count == 0 else f"{count} CUDA device(s)"
        return pytest.mark.skip(reason=f"needs {n} CUDA device(s) for NCCL, this machine has {what}")
    if not nccl_here():
        return pytest.mark.skip(reason="the NCCL library (nvidia-nccl-cu13 wheel) is not installed")
    return pytest.mark.gpu


def all_true(results: dict) -> list:
    """The checks of a program's results that are not True (name and what it said)."""
    info = ("backend", "nccl_", "ddp_buckets")
    return [(k, v) for k, v in results.items() if v is not True and not k.startswith(info)]
