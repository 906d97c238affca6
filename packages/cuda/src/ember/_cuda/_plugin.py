"""The plugin object the core loads through the ``ember.plugins`` entry point "cuda".

``install()`` always makes the API module available (``ember.cuda.<name>``); the "cuda"
backend and the kernels are registered only when a CUDA device is present, so a machine
without one behaves exactly like a CPU-only install (``device="cuda"`` raises the
AssertionError of PyTorch's CPU build).
"""

from __future__ import annotations

from . import api


class CudaPlugin:
    api = api

    def __init__(self):
        self.installed = False

    def is_available(self) -> bool:
        return api.is_available()

    # DLPack (the core's interop asks the device's plugin for non-CPU tensors).
    def dlpack_device(self, t) -> tuple:
        from ._dlpack import KDL_CUDA

        return (KDL_CUDA, t._device.index or 0)

    def to_dlpack(self, t, stream=None, max_version=None, dl_device=None, copy=None):
        from . import _dlpack

        return _dlpack.to_dlpack(t, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def from_dlpack(self, obj):
        from . import _dlpack

        self.install()
        return _dlpack.from_dlpack(obj)

    def install(self) -> None:
        if self.installed or not api.is_available():
            return
        self.installed = True
        from ember._src.device import Backend, register_backend
        from ember._src.tensor import Tensor

        from . import (
            _ops_act_grads,
            _ops_adaptive,
            _ops_attention,
            _ops_composite,
            _ops_conv,
            _ops_copy,
            _ops_fold,
            _ops_group_norm,
            _ops_host,
            _ops_index,
            _ops_loss,
            _ops_matmul,
            _ops_more,
            _ops_optim,
            _ops_pad,
            _ops_pointwise,
            _ops_pool,
            _ops_put,
            _ops_reduce,
            _ops_rnn,
            _ops_rows,
            _ops_samplers,
            _ops_scatter,
            _ops_search,
            _ops_sort,
            _ops_stats,
            _ops_upsample,
            _random,
            _storage,
        )

        for module in (_ops_copy, _ops_attention, _ops_conv, _ops_pointwise, _ops_pool, _ops_reduce, _ops_rows,
                       _ops_matmul, _ops_index, _ops_loss, _ops_more, _ops_optim, _ops_stats, _ops_scatter, _ops_put,
                       _ops_adaptive, _ops_group_norm, _ops_composite, _ops_sort,
                       _ops_search, _ops_samplers, _ops_pad, _ops_upsample,
                       _ops_fold, _ops_act_grads, _ops_rnn, _ops_host, _random):
            module.register()
        backend = Backend("cuda", _storage.allocate, copy=_storage.copy, pin_memory=_storage.pin_memory,
                          is_pinned=_storage.is_pinned, device_count=api.device_count)
        backend.empty = _storage.empty  # new_empty_tensor's per-op path (lost in a merge once: test_cuda_native_host)
        backend.wrapper_front = _storage.wrapper_front  # compiled wrappers' buffers (inductor's _wrapper)
        # the compiler's Triton kernels launch through the plugin's cubin cache and launcher
        from . import _compile, _streams

        backend.compile_triton = _compile.kernel
        backend.current_stream = _streams.current_handle
        backend.assert_async = _ops_index.assert_async
        # compiled graphs call cuBLAS for their matmuls without the op's checks and views
        from . import _blas

        backend.gemm = _blas.gemm
        register_backend(backend)
        Tensor.record_stream = lambda self, stream: api.record_stream(self, stream)
        import ember.backends

        ember.backends.cuda.is_built = lambda: True


plugin = CudaPlugin()
