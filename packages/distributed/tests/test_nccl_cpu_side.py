"""The NCCL backend's wiring that needs no GPU: backend strings and device maps, what
``is_nccl_available`` and ``init_process_group("nccl")`` say without the library, PREMUL_SUM ops,
the ``ncclConfig_t`` prefix NCCL reads, and that CPU groups stay on MPI."""

from __future__ import annotations

import ctypes

import pytest

import ember.distributed as dist
from ember.distributed import _backend as B
from ember.distributed import _nccl_lib as N


def test_backend_strings_map_device_types():
    assert B.device_backends("gloo") == {"cpu": "gloo"}
    assert B.device_backends("mpi") == {"cpu": "mpi"}
    assert B.device_backends("nccl") == {"cuda": "nccl"}
    assert B.device_backends("cpu:gloo,cuda:nccl") == {"cpu": "gloo", "cuda": "nccl"}
    assert B.device_backends("CPU:GLOO, CUDA:NCCL") == {"cpu": "gloo", "cuda": "nccl"}
    # PyTorch's type and words (init_process_group("cpu:nonsense") in torch 2.13)
    with pytest.raises(AssertionError, match="Unknown c10d backend type NONSENSE"):
        B.device_backends("cpu:nonsense")
    with pytest.raises(AssertionError, match="Unknown c10d backend type"):
        B.device_backends("cpu:")
    assert B.backend_label({"cpu": "gloo", "cuda": "nccl"}) == "cpu:gloo,cuda:nccl"
    assert B.backend_label({"cuda": "nccl"}) == "nccl"


def test_default_backend_follows_what_is_installed():
    expected = {"cpu": "gloo", "cuda": "nccl"} if N.find_library() else {"cpu": "gloo"}
    assert B.device_backends(None) == expected
    assert dist.is_nccl_available() is (N.find_library() is not None)
    assert dist.get_default_backend_for_device("cuda") == "nccl"
    assert dist.get_default_backend_for_device("cpu") == "gloo"


@pytest.mark.skipif(N.find_library() is not None, reason="NCCL is installed here")
def test_nccl_without_the_library_fails_before_any_rendezvous():
    # No store, no peers: the check must come first, with PyTorch's words.
    with pytest.raises(RuntimeError, match="doesn't have NCCL built in"):
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=2)
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="doesn't have NCCL built in"):
        B.engine_factory("nccl", "cuda")


def test_premul_sum_carries_its_factor():
    op = dist._make_nccl_premul_sum(0.5)
    red = B.as_red_op(op)
    assert red == dist.ReduceOp.PREMUL_SUM and red.factor == 0.5 and red.name == "PREMUL_SUM"
    assert B.as_red_op(dist.ReduceOp.SUM) == dist.ReduceOp.SUM
    import ember
    from ember.distributed._buffers import check_op_for_dtype

    with pytest.raises(RuntimeError, match="Cannot use ReduceOp.PREMUL_SUM with Gloo"):  # gloo's type
        check_op_for_dtype(red, ember.float32)


def test_config_prefix_has_the_layout_nccl_reads():
    c = N.nonblocking_config()
    assert c.size == ctypes.sizeof(N.Config) and c.magic == 0xCAFEBEEF and c.version == 21400
    assert c.blocking == 0 and c.cgaClusterSize == -(2 ** 31) and c.netName is None
    # size_t, two unsigned, then ints: offsets as in nccl.h.
    assert [N.Config.size.offset, N.Config.magic.offset, N.Config.version.offset, N.Config.blocking.offset] == \
        [0, 8, 12, 16]
    assert N.Config.netName.offset == 32
    assert ctypes.sizeof(N.UniqueId) == 128


def test_unique_id_bytes_round_trip():
    raw = bytes(range(128))
    assert ctypes.string_at(ctypes.addressof(N.unique_id_from(raw)), 128) == raw
    with pytest.raises(dist.DistBackendError):
        N.unique_id_from(b"short")


def test_reduce_op_mapping_and_refusals():
    # The engine's op table needs no GPU: bools reduce as max/min, bitwise ops, MAX on complex and
    # AVG on integers are refused with PyTorch's exception types, PREMUL_SUM carries its factor.
    import ember
    from ember.distributed._backend import PremulSum, RedOpType
    from ember.distributed._nccl_engine import NCCLEngine

    engine = object.__new__(NCCLEngine)
    assert engine._op(RedOpType.SUM, ember.float32) == (N.SUM, None)
    assert engine._op(RedOpType.AVG, ember.bfloat16) == (N.AVG, None)
    assert engine._op(RedOpType.SUM, ember.bool) == (N.MAX, None)
    assert engine._op(RedOpType.PRODUCT, ember.bool) == (N.MIN, None)
    assert engine._op(PremulSum(0.25), ember.float32) == ("premul", 0.25)
    refused = ((RedOpType.BAND, ember.int32, ValueError), (RedOpType.MAX, ember.complex64, ValueError),
               (RedOpType.AVG, ember.int64, RuntimeError), (RedOpType.PREMUL_SUM, ember.float32, ValueError))
    for op, dtype, kind in refused:
        with pytest.raises(kind):
            engine._op(op, dtype)


def test_staging_makes_contiguous_buffers_and_writes_back():
    import ember
    from ember.distributed._nccl_engine import _Staged

    base = ember.arange(12.0).reshape(3, 4)
    view = base.t()
    staged = _Staged(view)
    assert staged.buf.is_contiguous() and staged.ptr == staged.buf.data_ptr()
    staged.buf.mul_(2)
    staged.writeback()
    assert ember.equal(base, ember.arange(12.0).reshape(3, 4) * 2)
    plain = ember.ones(4)
    assert _Staged(plain).buf is plain
