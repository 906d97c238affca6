"""ember.save -> ember.load: every dtype and layout, containers, sharing, paths, map_location."""

from __future__ import annotations

import io
import math
import os
import pathlib
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember.serialization import UnpicklingError

from conftest import DTYPE_PAIRS, make_pair

LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **load_kwargs)


def assert_tensor_equal(a, b):
    assert type(a) is type(b)
    assert a.dtype is b.dtype
    assert tuple(a.shape) == tuple(b.shape)
    assert a.stride() == b.stride()
    assert a.storage_offset() == b.storage_offset()
    np.testing.assert_array_equal(a.float().numpy() if a.dtype is ember.bfloat16 else a.numpy(),
                                  b.float().numpy() if b.dtype is ember.bfloat16 else b.numpy())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPE_PAIRS))
def test_every_dtype_and_layout(name, layout):
    e, _ = make_pair((3, 4), name, layout=layout)
    out = roundtrip(e)
    # PyTorch's format keeps the view: the whole storage plus size/stride/offset.
    assert_tensor_equal(out, e)
    assert out.untyped_storage().nbytes() == e.untyped_storage().nbytes()


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,)])
@pytest.mark.parametrize("name", ["float32", "bool", "bfloat16", "int64"])
def test_zero_dim_and_empty(shape, name):
    e = ember.zeros(shape, dtype=DTYPE_PAIRS[name][0])
    assert_tensor_equal(roundtrip(e), e)


def test_storage_offset_view():
    base = ember.arange(20, dtype=ember.float64)
    view = base[5:15].reshape(2, 5)[:, 1:4]
    out = roundtrip(view)
    assert_tensor_equal(out, view)
    assert out.untyped_storage().nbytes() == 20 * 8


def test_nested_containers():
    obj = {
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -(2**31), 2**31 - 1, 2**31, 2**64, -(2**200), 10**500],
        "floats": (0.0, -0.0, 1.5, 1e-300, float("inf"), -float("inf")),
        "str": ["", "ascii", "ünïcødé ✓", "\n\x00", "x" * 300],
        "misc": [None, True, False, b"", b"\x00\xff bytes"],
        "nested": {"a": (1, (2, [3, {"b": OrderedDict([("z", 1), ("a", 2)])}]))},
        1: "int key",
        (1, 2): "tuple key",
        None: "none key",
        "tuples": ((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4, 5)),
    }
    out = roundtrip(obj)
    assert out == obj
    assert type(out["nested"]["a"][1][1][1]["b"]) is OrderedDict
    assert list(out["nested"]["a"][1][1][1]["b"]) == ["z", "a"]
    assert math.copysign(1, out["floats"][1]) == -1


def test_nan_and_large_containers():
    out = roundtrip({"nan": float("nan"), "list": list(range(2500)), "dict": {str(i): i for i in range(2100)}})
    assert math.isnan(out["nan"])
    assert out["list"] == list(range(2500))
    assert out["dict"] == {str(i): i for i in range(2100)}


def test_dtypes_sizes_devices():
    obj = [ember.float32, ember.bfloat16, ember.bool, ember.Size([2, 3]), ember.Size([]), ember.device("cpu")]
    out = roundtrip(obj)
    assert out[:3] == [ember.float32, ember.bfloat16, ember.bool]
    assert type(out[3]) is ember.Size and out[3] == (2, 3)
    assert type(out[4]) is ember.Size and out[4] == ()
    assert out[5] == ember.device("cpu")


def test_views_share_storage_after_load():
    base = ember.arange(12.0).reshape(3, 4)
    out = roundtrip({"base": base, "row": base[1], "col": base[:, 2], "t": base.t()})
    storages = {id(t.untyped_storage()) for t in out.values()}
    assert len(storages) == 1
    out["base"][1, 2] = 100.0
    assert out["row"][2].item() == 100.0 and out["col"][1].item() == 100.0 and out["t"][2, 1].item() == 100.0


def test_same_tensor_twice_is_one_object():
    t = ember.ones(3)
    out = roundtrip([t, t, {"again": t}])
    assert out[0] is out[1] is out[2]["again"]


def test_separate_storages_stay_separate():
    a, b = ember.ones(2), ember.ones(2)
    out = roundtrip([a, b])
    assert out[0].untyped_storage() is not out[1].untyped_storage()


def test_loaded_tensors_own_their_memory():
    buf = io.BytesIO()
    ember.save({"t": ember.arange(4.0)}, buf)
    data = bytearray(buf.getvalue())
    out = ember.load(io.BytesIO(data))
    data[:] = b"\x00" * len(data)
    assert out["t"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_requires_grad_round_trips():
    t = ember.ones(2, requires_grad=True)
    out = roundtrip({"t": t, "plain": ember.ones(2)})
    assert out["t"].requires_grad and not out["plain"].requires_grad


def test_parameter_round_trips_as_a_parameter_or_a_grad_tensor():
    class Parameter(ember.Tensor):  # stands in for ember.nn.Parameter, which lives in ember-nn
        pass

    p = ember.Tensor._make_subclass(Parameter, ember.arange(3.0), True)
    out = roundtrip({"w": p})["w"]
    assert out.requires_grad
    assert out.tolist() == [0.0, 1.0, 2.0]


def test_state_dict_metadata_attribute_round_trips():
    sd = OrderedDict(weight=ember.ones(2))
    sd._metadata = OrderedDict({"": {"version": 1}})
    out = roundtrip(sd)
    assert type(out) is OrderedDict and out._metadata == {"": {"version": 1}}


def test_self_referencing_list():
    lst = [1]
    lst.append(lst)
    out = roundtrip(lst)
    assert out[1] is out


def test_recursive_tuple_is_refused():
    lst = []
    tup = (lst,)
    lst.append(tup)
    with pytest.raises(ValueError, match="tuple"):
        ember.save(tup, io.BytesIO())


class _Custom:
    pass


@pytest.mark.parametrize("value, type_name", [
    ({1, 2}, None),  # set is on the weights_only allow-list
    (_Custom(), "_Custom"),
    (np.float64(1.0), "numpy"),
    (np.ones(2), "numpy"),
    (int, None),
    (1j, None),
])
def test_any_picklable_object_saves_and_needs_weights_only_false(value, type_name):
    # As torch.save: saving pickles anything; loading code-bearing globals needs weights_only=False.
    buf = io.BytesIO()
    ember.save({"ok": ember.ones(1), "bad": [value]}, buf)
    buf.seek(0)
    back = ember.load(buf, weights_only=False)
    assert type(back["bad"][0]) is type(value)
    if type_name is not None:
        buf.seek(0)
        with pytest.raises(UnpicklingError, match=type_name):
            ember.load(buf)


_MODULE_LAMBDA = lambda: 0  # noqa: E731 - a lambda bound at module level: its name does not look it up


def test_unpicklable_objects_raise():
    # As PyTorch's save (the C pickler): a local object is an AttributeError, a function its qualified
    # name does not find again a PicklingError.
    import torch

    for lib in (ember, torch):
        with pytest.raises(AttributeError, match="Can't pickle local object 'test_unpicklable_objects_raise"):
            lib.save({"bad": lambda: 0}, io.BytesIO())
        with pytest.raises(pickle.PicklingError, match="attribute lookup <lambda> on .* failed"):
            lib.save({"bad": _MODULE_LAMBDA}, io.BytesIO())


def test_meta_tensor_is_refused():
    with pytest.raises(RuntimeError, match="meta"):
        ember.save(ember.empty(2, device="meta"), io.BytesIO())


def test_save_and_load_paths(tmp_path):
    t = ember.arange(6.0).reshape(2, 3)
    for path in (str(tmp_path / "model.pt"), tmp_path / "other.pth"):
        ember.save({"t": t}, path)
        assert ember.load(path)["t"].tolist() == t.tolist()
    names = zipfile.ZipFile(tmp_path / "model.pt").namelist()
    assert names[0] == "model/data.pkl"  # torch.save names the archive after the file
    assert sorted(os.listdir(tmp_path)) == ["model.pt", "other.pth"]


def test_layout_matches_torch_save():
    buf = io.BytesIO()
    ember.save({"a": ember.ones(3), "b": ember.zeros(2, dtype=ember.int64)}, buf)
    z = zipfile.ZipFile(buf)
    assert z.namelist() == ["archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
                            "archive/byteorder", "archive/data/0", "archive/data/1", "archive/version"]
    assert z.read("archive/version") == b"3\n" and z.read("archive/byteorder") == b"little"
    raw = buf.getvalue()
    for info in z.infolist():
        assert info.compress_type == zipfile.ZIP_STORED
        name_len, extra_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
            int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
        assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0  # every record 64-byte aligned
    assert z.testzip() is None


def test_saving_is_deterministic():
    obj = {"w": ember.arange(5.0), "meta": [1, "x"]}
    a, b = io.BytesIO(), io.BytesIO()
    ember.save(obj, a)
    ember.save(obj, b)
    assert a.getvalue() == b.getvalue()


def test_forced_zip64_is_readable():
    from ember.serialization import _checkpoint

    t = ember.arange(10, dtype=ember.int32)
    buf = io.BytesIO()
    hook = _checkpoint._SaveHook()
    pkl = _checkpoint.Pickler(hook).dumps({"t": t})
    _checkpoint._write_archive(buf, "archive", pkl, list(hook.storages.values()), True, force_zip64=True)
    assert zipfile.ZipFile(buf).testzip() is None
    buf.seek(0)
    assert ember.load(buf)["t"].tolist() == list(range(10))


@pytest.mark.parametrize("map_location", [
    None, "cpu", ember.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"}, lambda storage, loc: storage,
    lambda storage, loc: None,
])
def test_map_location_cpu_forms(map_location):
    out = roundtrip({"t": ember.arange(3.0)}, map_location=map_location)
    assert out["t"].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("map_location, exc", [
    ("meta", RuntimeError), ("cuda:0", RuntimeError), ({"cpu": "cuda"}, RuntimeError), (3.5, TypeError),
    (lambda s, loc: "cpu", TypeError),
])
def test_map_location_errors(map_location, exc):
    with pytest.raises(exc):
        roundtrip({"t": ember.arange(3.0)}, map_location=map_location)


def test_weights_only_false_is_still_safe():
    assert roundtrip([1, 2], weights_only=False) == [1, 2]


def test_bad_arguments():
    with pytest.raises(ValueError):
        ember.save(1, io.BytesIO(), pickle_module=object())
    with pytest.raises(RuntimeError):
        ember.save(1, io.BytesIO(), _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="mmap"):
        ember.load(io.BytesIO(), mmap=True)
    with pytest.raises(TypeError):
        ember.load(io.BytesIO(), bogus=1)


def test_mmap_load_is_copy_on_write(tmp_path):
    path = tmp_path / "m.pt"
    base = ember.arange(16, dtype=ember.float64)
    ember.save({"a": base, "b": base[3:7], "c": ember.ones(3, dtype=ember.bfloat16)}, path)
    before = path.read_bytes()
    out = ember.load(path, mmap=True)
    assert out["b"].tolist() == [3.0, 4.0, 5.0, 6.0] and out["c"].float().tolist() == [1.0] * 3
    out["a"][4] = -1.0
    assert out["b"][1].item() == -1.0  # still one shared storage
    assert path.read_bytes() == before  # a private mapping: the file never changes


def test_pathlike_and_non_seekable_stream(tmp_path):
    class Stream(io.RawIOBase):  # readable, not seekable (a pipe)
        def __init__(self, data):
            self._inner = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self._inner.readinto(b)

        def seek(self, *args):
            raise io.UnsupportedOperation("seek")

        def seekable(self):
            return False

    buf = io.BytesIO()
    ember.save([ember.ones(2)], buf)
    assert ember.load(Stream(buf.getvalue()))[0].tolist() == [1.0, 1.0]
    p = pathlib.Path(tmp_path) / "x.pt"
    ember.save(3, p)
    assert ember.load(p) == 3


def test_error_type_is_unpickling_and_runtime_error():
    assert issubclass(UnpicklingError, RuntimeError)
    import pickle

    assert issubclass(UnpicklingError, pickle.UnpicklingError)
    assert ember.serialization.load is ember.load and ember.serialization.save is ember.save
