"""``ember.__config__``: how this ember was built and how it runs in parallel (PyTorch's
``torch.__config__.show()`` / ``parallel_info()``; ember reports its own build, not ATen's)."""

from __future__ import annotations

import os
import platform
import sys


def show() -> str:
    """A human-readable description of the build: compiler, Python, the native module's CPU target."""
    import sysconfig

    import ember
    from ember import _C

    lines = ["ember built with:", f"  - ember {ember.__version__}", f"  - Python {platform.python_version()}",
             f"  - Compiler: {sysconfig.get_config_var('CC') or 'unknown'}",
             f"  - CPU capability usage: {ember.backends.cpu.get_cpu_capability()}",
             f"  - Native module: {os.path.basename(_C.__file__)}", ""]
    return "\n".join(lines)


def parallel_info() -> str:
    """The intra-op thread settings and the environment variables that set them."""
    import ember

    lines = ["ATen/Parallel:", f"\tat::get_num_threads() : {ember.get_num_threads()}",
             f"\tat::get_num_interop_threads() : {ember.get_num_interop_threads()}",
             f"std::thread::hardware_concurrency() : {os.cpu_count()}", "Environment variables:"]
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        lines.append(f"\t{var} : {os.environ.get(var, '[not set]')}")
    lines.append(f"ATen parallel backend: {'OpenMP' if sys.platform != 'win32' else 'native thread pool'}")
    return "\n".join(lines) + "\n"

