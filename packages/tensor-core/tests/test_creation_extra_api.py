"""empty_strided / new_empty_strided, frombuffer, the deprecated range, set/get_default_device,
and the process-wide switches (interop threads, warn_always, flush_denormal, anomaly mode,
typename) against PyTorch."""

import array
import mmap
import warnings

import pytest

import ember
from ember._src import plugins

from conftest import assert_same, torch


@pytest.mark.parametrize("size, stride", [((2, 3), (3, 1)), ((2, 3), (1, 2)), ((2, 3), (0, 1)), ((0, 4), (4, 1)),
                                          ((), ()), ((3, 2), (10, 3))])
@pytest.mark.parametrize("dtype", ["float32", "int16", "float64"])
def test_empty_strided(size, stride, dtype):
    e = ember.empty_strided(size, stride, dtype=getattr(ember, dtype))
    t = torch.empty_strided(size, stride, dtype=getattr(torch, dtype))
    assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride() and e.dtype.name == dtype
    assert e.untyped_storage().nbytes() == t.untyped_storage().nbytes()
    assert e.storage_offset() == 0 and e._base is None
    n = e.new_empty_strided(size, stride)
    assert n.stride() == t.new_empty_strided(size, stride).stride() and n.dtype == e.dtype
    assert ember.empty_strided(size, stride, device="meta").is_meta


def test_empty_strided_options_and_errors():
    assert ember.empty_strided((2,), (1,), requires_grad=True).requires_grad
    assert ember.zeros(1, dtype=ember.int8).new_empty_strided((2,), (1,), dtype=ember.float64).dtype == ember.float64
    for call, exc in [
        (lambda m: m.empty_strided((2, 3), (1,)), RuntimeError),
        (lambda m: m.empty_strided((-1,), (1,)), RuntimeError),
        (lambda m: m.empty_strided((2.0,), (1,)), TypeError),
        (lambda m: m.empty_strided((2,), (1,), pin_memory=True), RuntimeError),
    ]:
        with pytest.raises(exc):
            call(torch)
        with pytest.raises(exc):
            call(ember)


# -- frombuffer ---------------------------------------------------------------------------------

@pytest.mark.parametrize("count, offset", [(-1, 0), (2, 4), (-1, 8), (1, 12), (3, 1)])
def test_frombuffer_shares_memory(count, offset):
    e_buf = bytearray(range(16))
    t_buf = bytearray(range(16))
    e = ember.frombuffer(e_buf, dtype=ember.int32 if offset % 4 == 0 else ember.int8, count=count, offset=offset)
    t = torch.frombuffer(t_buf, dtype=torch.int32 if offset % 4 == 0 else torch.int8, count=count, offset=offset)
    assert_same(e, t)
    e[0] = 99
    t[0] = 99
    assert e_buf == t_buf  # the write went into the buffer


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "int16"])
def test_frombuffer_array_and_mmap(dtype):
    codes = {"float32": "f", "float64": "d", "int64": "q", "uint8": "B", "int16": "h"}
    data = array.array(codes[dtype], [1, 2, 3, 4, 5])
    assert_same(ember.frombuffer(data, dtype=getattr(ember, dtype)),
                torch.frombuffer(array.array(codes[dtype], [1, 2, 3, 4, 5]), dtype=getattr(torch, dtype)))
    with mmap.mmap(-1, 64) as region:
        t = ember.frombuffer(region, dtype=getattr(ember, dtype))
        assert t.numel() == 64 // t.element_size()
        del t


def test_frombuffer_keeps_the_buffer_alive_and_warns_for_read_only():
    t = ember.frombuffer(bytearray(b"\x01\x02\x03\x04"), dtype=ember.uint8)
    assert t.tolist() == [1, 2, 3, 4]  # the bytearray has no other reference
    with pytest.warns(UserWarning, match="not writable"):
        r = ember.frombuffer(b"\x05\x06", dtype=ember.uint8)
    assert r.tolist() == [5, 6]
    assert ember.frombuffer(bytearray(8), dtype=ember.float32, requires_grad=True).requires_grad


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.frombuffer(bytearray(), dtype=m.float32), ValueError),
    (lambda m: m.frombuffer(bytearray(8), dtype=m.float32, count=0), ValueError),
    (lambda m: m.frombuffer(bytearray(8), dtype=m.float32, offset=8), ValueError),
    (lambda m: m.frombuffer(bytearray(8), dtype=m.float32, offset=-1), ValueError),
    (lambda m: m.frombuffer(bytearray(7), dtype=m.float32), ValueError),
    (lambda m: m.frombuffer(bytearray(8), dtype=m.float32, count=3), ValueError),
    (lambda m: m.frombuffer([1, 2], dtype=m.float32), ValueError),
])
def test_frombuffer_errors(call, exc):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc):
        call(ember)


# -- range --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, kwargs", [
    ((1, 4), {}), ((1, 4, 0.5), {}), ((0, 1, 0.3), {}), ((4, 1, -1), {}), ((1, 4), {"dtype": "int64"}),
    ((-2.5, 2.5, 1.25), {"dtype": "float64"}), ((3, 3), {}), ((0, 10, 3), {"dtype": "int32"}),
])
def test_range(args, kwargs):
    e_kw = {k: getattr(ember, v) for k, v in kwargs.items()}
    t_kw = {k: getattr(torch, v) for k, v in kwargs.items()}
    with pytest.warns(UserWarning, match="deprecated"):
        e = ember.range(*args, **e_kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.range(*args, **t_kw)
    assert_same(e, t)


@pytest.mark.parametrize("args, exc", [((4, 1), RuntimeError), ((1, 4, 0), RuntimeError), ((4,), TypeError)])
def test_range_errors(args, exc):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc):
            torch.range(*args)
        with pytest.raises(exc):
            ember.range(*args)


# -- default device -----------------------------------------------------------------------------

def test_default_device():
    assert ember.get_default_device() == ember.device("cpu")
    assert str(torch.get_default_device()) == "cpu"
    try:
        ember.set_default_device("meta")
        assert ember.get_default_device() == ember.device("meta")
        for t in (ember.zeros(2), ember.tensor([1.0]), ember.arange(3), ember.rand(2), ember.empty_strided((2,), (1,)),
                  ember.tril_indices(3, 3), ember.eye(2)):
            assert t.is_meta, t
        assert ember.zeros(2, device="cpu").is_cpu
        assert ember.empty_like(ember.zeros(2, device="cpu")).is_cpu  # _like factories follow their input
    finally:
        ember.set_default_device(None)
    assert ember.zeros(2).is_cpu and ember.get_default_device() == ember.device("cpu")


# -- switches -----------------------------------------------------------------------------------

def test_interop_threads():
    assert ember.get_num_interop_threads() >= 1
    before = ember.get_num_interop_threads()
    ember.set_num_interop_threads(3)
    assert ember.get_num_interop_threads() == 3
    ember.set_num_interop_threads(before)
    for bad, exc in ((0, RuntimeError), (-2, RuntimeError), (1.5, RuntimeError), (True, RuntimeError)):
        with pytest.raises(exc):
            torch.set_num_interop_threads(bad)
        with pytest.raises(exc):
            ember.set_num_interop_threads(bad)


def test_warn_always():
    assert ember.is_warn_always_enabled() is torch.is_warn_always_enabled() is False
    ember.set_warn_always(True)
    assert ember.is_warn_always_enabled() is True
    ember.set_warn_always(False)
    assert ember.is_warn_always_enabled() is False


def test_flush_denormal():
    tiny = 1e-310  # a float64 denormal
    supported = ember.set_flush_denormal(True)
    assert supported == torch.set_flush_denormal(True)
    try:
        if supported:
            x = ember.tensor([tiny], dtype=ember.float64)
            assert (x * 1.0).item() == 0.0
    finally:
        ember.set_flush_denormal(False)
        torch.set_flush_denormal(False)
    assert (ember.tensor([tiny], dtype=ember.float64) * 1.0).item() == tiny


@pytest.mark.skipif(plugins.load("autograd") is None, reason="needs ember-autograd")
def test_anomaly_switch_is_autograds():
    from ember.autograd import anomaly_mode

    assert ember.is_anomaly_enabled() is torch.is_anomaly_enabled() is False
    ember.set_anomaly_enabled(True)
    try:
        assert ember.is_anomaly_enabled() and anomaly_mode.is_anomaly_enabled()
        ember.set_anomaly_enabled(True, check_nan=False)
        assert not ember.is_anomaly_check_nan_enabled()
    finally:
        ember.set_anomaly_enabled(False)
    assert not ember.is_anomaly_enabled() and ember.is_anomaly_check_nan_enabled()


class _Local:
    class Inner:
        pass


@pytest.mark.parametrize("obj", [5, "a", 1.5, None, int, _Local(), _Local.Inner, len, [1], pytest, warnings.warn])
def test_typename(obj):
    assert ember.typename(obj) == torch.typename(obj)


def test_typename_of_tensors_and_sizes():
    for name in ("float32", "int64", "bool", "float16"):
        assert ember.typename(ember.zeros(1, dtype=getattr(ember, name))) == \
            torch.typename(torch.zeros(1, dtype=getattr(torch, name)))
    assert ember.typename(ember.Size([1])) == "ember._src.shapes.Size"
