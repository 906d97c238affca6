"""ember.load reads torch.save files; torch.load(weights_only=True) reads ember.save files."""

from __future__ import annotations

import io
import threading
from collections import Counter, OrderedDict

import numpy as np
import pytest

import ember
from ember.serialization import UnpicklingError

from conftest import DTYPE_PAIRS, make_pair, to_torch, torch


def torch_to_ember(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return ember.load(buf)


def ember_to_torch(obj):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def assert_matches(e, t):
    """An ember tensor equals a torch tensor: values, dtype and the view (stride, offset)."""
    assert isinstance(e, ember.Tensor) and isinstance(t, torch.Tensor)
    assert e.dtype.name == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    assert tuple(e.stride()) == tuple(t.stride())
    assert e.storage_offset() == t.storage_offset()
    assert e.requires_grad == t.requires_grad
    torch.testing.assert_close(to_torch(e.detach()), t.detach(), rtol=0, atol=0, equal_nan=True)


def assert_tree(e, t):
    if isinstance(t, torch.Tensor):
        assert_matches(e, t)
    elif isinstance(t, dict):
        assert type(e).__name__ == type(t).__name__ and list(e) == list(t)
        for k in t:
            assert_tree(e[k], t[k])
    elif isinstance(t, (list, tuple)) and not isinstance(t, torch.Size):
        assert type(e) is type(t) and len(e) == len(t)
        for a, b in zip(e, t):
            assert_tree(a, b)
    elif isinstance(t, torch.dtype):
        assert e.name == str(t).split(".")[-1]
    else:
        assert e == t


LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPE_PAIRS))
def test_torch_tensors_load_in_ember(name, layout):
    _, t = make_pair((3, 4), name, layout=layout)
    assert_matches(torch_to_ember(t), t)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPE_PAIRS))
def test_ember_tensors_load_in_torch(name, layout):
    e, t = make_pair((3, 4), name, layout=layout)
    out = ember_to_torch(e)
    assert_matches(e, out)
    assert out.untyped_storage().nbytes() == e.untyped_storage().nbytes()


@pytest.mark.parametrize("shape", [(), (0,), (3, 0)])
def test_zero_dim_and_empty_both_ways(shape):
    t = torch.zeros(shape)
    assert_matches(torch_to_ember(t), t)
    e = ember.zeros(shape, dtype=ember.int16)
    assert_matches(e, ember_to_torch(e))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(12, 4), torch.nn.LayerNorm(4),
    )


def test_torch_module_state_dict_loads_in_ember():
    sd = _model().state_dict()
    out = torch_to_ember(sd)
    assert type(out) is OrderedDict
    assert_tree(out, sd)
    assert out._metadata == sd._metadata  # module versions, which load_state_dict reads
    assert out["1.num_batches_tracked"].dtype is ember.int64


def test_ember_state_dict_loads_into_a_torch_module():
    model = _model()
    sd = model.state_dict()
    ember_sd = torch_to_ember(sd)
    for v in ember_sd.values():
        v.mul_(2) if v.dtype.is_floating_point else v.add_(5)
    back = ember_to_torch(ember_sd)
    assert type(back) is OrderedDict and back._metadata == sd._metadata
    fresh = _model()
    fresh.load_state_dict(back)
    for k, v in fresh.state_dict().items():
        expected = sd[k] * 2 if sd[k].is_floating_point() else sd[k] + 5
        torch.testing.assert_close(v, expected)


def test_torch_adam_state_dict_loads_in_ember():
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.8, 0.9))
    model(torch.randn(2, 2, 4, 4)).sum().backward()
    opt.step()
    sd = opt.state_dict()
    out = torch_to_ember(sd)
    assert_tree(out, sd)
    assert out["param_groups"][0]["betas"] == (0.8, 0.9)
    assert out["state"][0]["step"].dtype is ember.float32 and out["state"][0]["step"].item() == 1.0
    # and back: torch accepts ember's copy of its own optimizer state
    opt2 = torch.optim.Adam(_model().parameters())
    opt2.load_state_dict(ember_to_torch(out))
    torch.testing.assert_close(opt2.state_dict()["state"][0]["exp_avg"], sd["state"][0]["exp_avg"])


def test_torch_parameter_loads_as_a_grad_tensor():
    p = torch.nn.Parameter(torch.arange(3.0))
    out = torch_to_ember({"p": p})["p"]
    assert out.requires_grad and out.tolist() == [0.0, 1.0, 2.0]


def test_ember_parameter_loads_as_torch_parameter():
    class Parameter(ember.Tensor):
        pass

    p = ember.Tensor._make_subclass(Parameter, ember.arange(3.0), True)
    out = ember_to_torch({"p": p})["p"]
    assert type(out) is torch.nn.Parameter and out.requires_grad
    assert out.tolist() == [0.0, 1.0, 2.0]


def test_requires_grad_and_non_leaf_tensors():
    t = torch.ones(2, requires_grad=True)
    out = torch_to_ember({"leaf": t, "nonleaf": t * 2})
    assert out["leaf"].requires_grad and out["nonleaf"].requires_grad
    assert out["nonleaf"].tolist() == [2.0, 2.0]


def test_shared_views_stay_shared_both_ways():
    base = torch.arange(12.0).reshape(3, 4)
    out = torch_to_ember([base, base[1:, ::2], base.t()])
    assert out[0].untyped_storage() is out[1].untyped_storage() is out[2].untyped_storage()
    assert_tree(out, [base, base[1:, ::2], base.t()])
    eb = ember.arange(12.0).reshape(3, 4)
    back = ember_to_torch([eb, eb[1:, ::2]])
    assert back[0].untyped_storage().data_ptr() == back[1].untyped_storage().data_ptr()
    back[0][2, 2] = -1.0
    assert back[1][1, 1].item() == -1.0


def test_python_values_both_ways():
    obj = {
        "none": None, "bools": [True, False], "ints": [0, 300, 70000, -(2**40), 2**70], "float": -2.5,
        "str": "ünï", "bytes": b"\x00\xffab", "tuple": (1, (2, 3), [4]), "od": OrderedDict(b=1, a=2),
        "dtype": torch.bfloat16, "size": torch.Size([2, 3]), "device": torch.device("cpu"),
    }
    out = torch_to_ember(obj)
    assert out["dtype"] is ember.bfloat16 and out["size"] == ember.Size([2, 3]) and type(out["size"]) is ember.Size
    assert out["device"] == ember.device("cpu")
    plain = {k: v for k, v in obj.items() if k not in ("dtype", "size", "device")}
    assert {k: out[k] for k in plain} == plain
    back = ember_to_torch(out)
    assert back == obj and type(back["size"]) is torch.Size


def test_torch_extras_ember_reads():
    obj = {"set": {1, 2}, "bytearray": bytearray(b"xy"), "complex": 1 + 2j, "counter": Counter("aab"),
           "frozen": [frozenset()]}
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    assert ember.load(buf) == obj


def test_torch_file_on_disk_with_archive_named_after_file(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"w": torch.ones(2)}, path)
    assert ember.load(path)["w"].tolist() == [1.0, 1.0]
    out = ember.load(path, mmap=True)
    assert out["w"].tolist() == [1.0, 1.0]
    ember.save({"w": ember.ones(2)}, tmp_path / "mine.pt")
    assert torch.load(tmp_path / "mine.pt", weights_only=True, mmap=True)["w"].tolist() == [1.0, 1.0]


def test_tensor_with_python_attributes():
    t = torch.ones(2)
    t.note = "hello"
    out = torch_to_ember(t)
    assert out.note == "hello" and out.tolist() == [1.0, 1.0]
    back = ember_to_torch(out)
    assert type(back) is torch.Tensor and back.note == "hello" and back.tolist() == [1.0, 1.0]


def test_parameter_with_python_attributes_both_ways():
    p = torch.nn.Parameter(torch.ones(2))
    p.tag = 3
    out = torch_to_ember(p)
    assert out.tag == 3 and out.requires_grad

    class Parameter(ember.Tensor):
        pass

    ep = ember.Tensor._make_subclass(Parameter, ember.ones(2), True)
    ep.tag = [1, "x"]
    back = ember_to_torch(ep)
    assert type(back) is torch.nn.Parameter and back.tag == [1, "x"]


def test_tensor_attribute_of_unpicklable_type_is_refused():
    t = ember.ones(2)
    t.helper = threading.Lock()
    with pytest.raises(TypeError, match="lock"):
        ember.save(t, io.BytesIO())


def test_unsupported_torch_dtype_is_named():
    with pytest.raises(UnpicklingError, match="uint16"):
        torch_to_ember(torch.ones(2, dtype=torch.uint16))
    with pytest.raises(UnpicklingError, match="torch.float8_e4m3fn is not supported"):
        torch_to_ember(torch.ones(2, dtype=torch.float8_e4m3fn))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_tensors_round_trip_both_ways(dtype):
    t = torch.randn(3, 2, dtype=getattr(torch, dtype)).t()  # non-contiguous, like a state-dict view
    e = torch_to_ember(t)
    assert e.dtype == getattr(ember, dtype) and e.shape == (2, 3)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    buf = io.BytesIO()
    ember.save({"z": e}, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=True)["z"]
    assert back.dtype == t.dtype
    torch.testing.assert_close(back, t, rtol=0, atol=0)


def test_map_location_with_torch_files():
    buf = io.BytesIO()
    torch.save({"t": torch.ones(2)}, buf)
    seen = []
    buf.seek(0)
    ember.load(buf, map_location=lambda storage, loc: seen.append(loc))
    assert seen == ["cpu"]


def test_big_endian_file_is_byteswapped(tmp_path):
    # PyTorch records the writer's byte order; build a big-endian file from an ember one.
    tensors = {name: make_pair((2, 3), name)[0] for name in DTYPE_PAIRS}
    buf = io.BytesIO()
    ember.save(tensors, buf)
    import zipfile

    src = zipfile.ZipFile(buf)
    out = io.BytesIO()
    keys = {}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("byteorder"):
                data = b"big"
            elif "/data/" in info.filename:
                key = info.filename.rsplit("/", 1)[1]
                keys[key] = data
                itemsize = list(tensors.values())[int(key)].element_size()
                data = np.frombuffer(data, dtype=f"u{itemsize}").byteswap().tobytes()
            dst.writestr(info.filename, data)
    out.seek(0)
    loaded = ember.load(out)
    for name, t in tensors.items():
        assert_matches(loaded[name], to_torch(t))
    out.seek(0)
    reference = torch.load(out, weights_only=True)  # torch swaps too: same values
    for name in tensors:
        assert_matches(loaded[name], reference[name])


def test_raw_storage_loads_as_a_storage():
    out = torch_to_ember(torch.arange(3, dtype=torch.int16).untyped_storage())
    assert bytes(memoryview(out)) == torch.arange(3, dtype=torch.int16).numpy().tobytes()


def test_torch_reads_zip64_records():
    # Checkpoints over 4 GiB need zip64 headers; forcing them keeps this test small.
    from ember.serialization import _checkpoint

    t = ember.arange(10, dtype=ember.int32)
    hook = _checkpoint._SaveHook()
    pkl = _checkpoint.Pickler(hook).dumps({"t": t, "v": t[2:5]})
    buf = io.BytesIO()
    _checkpoint._write_archive(buf, "archive", pkl, list(hook.storages.values()), True, force_zip64=True)
    buf.seek(0)
    out = torch.load(buf, weights_only=True)
    assert out["t"].tolist() == list(range(10)) and out["v"].tolist() == [2, 3, 4]
