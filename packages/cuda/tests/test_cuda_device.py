"""The CUDA device: tensors, copies, pinned memory, the caching allocator, streams, events,
properties and errors (GPU only; skipped without one)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import host, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16, ember.float64, ember.int64,
                                   ember.int32, ember.uint8, ember.bool])
def test_round_trip_keeps_values(dtype):
    x = rand((3, 5), dtype)
    g = x.cuda()
    assert g.device == ember.device("cuda:0") and g.is_cuda and g.dtype is dtype
    assert g.get_device() == 0
    back = g.cpu()
    assert back.device.type == "cpu"
    np.testing.assert_array_equal(host(back), host(x))
    np.testing.assert_array_equal(host(g.t()), host(x.t()))  # a non-contiguous device view to the host
    np.testing.assert_array_equal(host(x.t().cuda()), host(x.t()))  # and from a non-contiguous host view


def test_to_device_forms_and_conversion():
    x = rand((4, 4))
    for g in (x.to("cuda"), x.to(ember.device("cuda", 0)), x.cuda(0), x.to("cuda", ember.float64),
              ember.tensor([[1.0, 2.0]], device="cuda"), ember.zeros(2, 3, device="cuda")):
        assert g.device.type == "cuda"
    g = x.cuda()
    assert g.to("cuda") is g
    h = g.to(ember.float16)
    np.testing.assert_allclose(host(h), host(x.half()), rtol=0, atol=0)
    y = ember.empty(4, 4, device="cuda")
    y.copy_(x)  # host -> device copy_
    np.testing.assert_array_equal(host(y), host(x))
    z = ember.empty(4, 4)
    z.copy_(g.t())  # device -> host copy_ of a transposed view
    np.testing.assert_array_equal(host(z), host(x.t()))
    assert g.sum().item() == pytest.approx(float(x.sum()), rel=1e-5)
    assert [v for row in g.tolist() for v in row] == pytest.approx([v for row in x.tolist() for v in row])
    assert "device='cuda:0'" in repr(g)


def test_cross_device_errors_match_pytorch():
    a, b = ember.ones(3).cuda(), ember.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.mm(ember.ones(2, 2).cuda(), ember.ones(2, 2))
    assert (a + ember.tensor(2.0)).device.type == "cuda"  # a 0-dim CPU tensor is a scalar
    with pytest.raises(TypeError, match="cuda"):
        a.numpy()


def test_pinned_memory_and_non_blocking_copies():
    x = rand((1000,))
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    np.testing.assert_array_equal(host(p), host(x))
    g = p.to("cuda", non_blocking=True)
    out = ember.empty(1000).pin_memory()
    out.copy_(g * 2, non_blocking=True)
    ember.cuda.synchronize()
    np.testing.assert_allclose(host(out), 2 * host(x))


def test_caching_allocator_statistics():
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    base = ember.cuda.memory_allocated()
    x = ember.empty(1 << 20, device="cuda")  # 4 MiB
    assert ember.cuda.memory_allocated() - base >= 4 << 20
    assert ember.cuda.max_memory_allocated() >= ember.cuda.memory_allocated()
    reserved = ember.cuda.memory_reserved()
    assert reserved >= ember.cuda.memory_allocated()
    ptr = x.data_ptr()
    del x
    assert ember.cuda.memory_allocated() == base
    y = ember.empty(1 << 20, device="cuda")  # the cached block comes back
    assert y.data_ptr() == ptr and ember.cuda.memory_reserved() == reserved
    del y
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() < reserved
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == ember.cuda.memory_allocated()
    stats = ember.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == ember.cuda.memory_allocated()
    assert "Allocated memory" in ember.cuda.memory_summary()


def test_out_of_memory_error_says_what_was_asked():
    with pytest.raises(ember.cuda.OutOfMemoryError, match="Tried to allocate"):
        ember.empty(1 << 44, dtype=ember.uint8, device="cuda")  # 16 TiB
    assert issubclass(ember.cuda.OutOfMemoryError, RuntimeError)
    with pytest.raises(ember.OutOfMemoryError):  # the same class, as torch.cuda.OutOfMemoryError
        ember.empty(1 << 44, dtype=ember.uint8, device="cuda")


def test_streams_and_events():
    s = ember.cuda.Stream()
    assert ember.cuda.current_stream() == ember.cuda.default_stream()
    x = ember.ones(1 << 20, device="cuda")
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    s.wait_stream(ember.cuda.current_stream())
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
        start.record()
        y = x * 3
        end.record()
    x.record_stream(s)
    ember.cuda.current_stream().wait_stream(s)
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0 and end.query()
    assert float(y.sum()) == 3 * (1 << 20)
    s.synchronize()
    assert s.query()
    with pytest.raises(RuntimeError, match="enable_timing"):
        ember.cuda.Event().elapsed_time(ember.cuda.Event())


def test_device_properties_and_queries():
    assert ember.cuda.is_available() and ember.cuda.device_count() >= 1
    assert ember.cuda.current_device() == 0
    props = ember.cuda.get_device_properties(0)
    assert props.total_memory > 1 << 30 and props.multi_processor_count > 0
    assert ember.cuda.get_device_name() == props.name
    assert ember.cuda.get_device_capability() == (props.major, props.minor)
    free, total = ember.cuda.mem_get_info()
    assert 0 < free <= total
    assert ember.cuda.is_bf16_supported() == (props.major >= 8)
    with ember.cuda.device(0):
        ember.cuda.synchronize()


def test_ops_without_a_cuda_kernel_raise_naming_op_and_device():
    x = ember.ones(4, 4, device="cuda")
    with pytest.raises(NotImplementedError, match="cuda"):
        x.to_sparse()  # no CUDA kernel yet (test_cuda_op_coverage.py pins the list)


def test_out_of_range_index_is_reported_at_the_next_sync():
    x = ember.ones(4, 3, device="cuda")
    bad = ember.tensor([0, 7], device="cuda")
    y = ember.index_select(x, 0, bad)
    with pytest.raises(RuntimeError, match="index out of bounds"):
        y.cpu()
    ember.cuda.synchronize()  # reported once


def test_cuda_rng_is_reproducible_and_distributed():
    ember.cuda.manual_seed(123)
    a = ember.empty(1 << 16, device="cuda").uniform_()
    b = ember.empty(1 << 16, device="cuda").normal_()
    ember.manual_seed(123)  # seeds the CUDA stream too, as torch.manual_seed
    a2 = ember.empty(1 << 16, device="cuda").uniform_()
    np.testing.assert_array_equal(host(a), host(a2))
    ha, hb = host(a), host(b)
    assert 0 <= ha.min() and ha.max() < 1 and abs(ha.mean() - 0.5) < 0.01
    assert abs(hb.mean()) < 0.02 and abs(hb.std() - 1) < 0.02
