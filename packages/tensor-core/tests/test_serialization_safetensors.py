"""ember.serialization.safetensors: the safetensors.torch API and file format, validated reads."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import ember
from ember.serialization import safetensors as est

from conftest import DTYPE_PAIRS, make_pair, to_torch, torch


def sample(names=tuple(DTYPE_PAIRS)):
    out = {}
    for i, name in enumerate(names):
        out[f"t_{name}"] = make_pair((2, 3), name, seed=i)[0].contiguous()
    out["scalar"] = ember.tensor(3.5)
    out["empty"] = ember.zeros(0, 4, dtype=ember.int32)
    return out


def assert_same_tensors(a: dict, b: dict):
    assert set(a) == set(b)
    for k in a:
        assert a[k].dtype is b[k].dtype and tuple(a[k].shape) == tuple(b[k].shape)
        np.testing.assert_array_equal(to_torch(a[k]).float().numpy(), to_torch(b[k]).float().numpy())


def frame(header, data=b"", raw_header: bytes | None = None) -> bytes:
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def test_round_trip_bytes_every_dtype():
    tensors = sample()
    out = est.load(est.save(tensors))
    assert_same_tensors(out, tensors)
    assert all(t.is_contiguous() and t.storage_offset() == 0 for t in out.values())


def test_round_trip_file_with_metadata(tmp_path):
    path = tmp_path / "model.safetensors"
    tensors = sample()
    est.save_file(tensors, path, metadata={"format": "pt", "note": "ünï"})
    assert_same_tensors(est.load_file(path), tensors)
    assert_same_tensors(est.load_file(str(path), device="cpu"), tensors)
    n = struct.unpack("<Q", path.read_bytes()[:8])[0]
    header = json.loads(path.read_bytes()[8:8 + n])
    assert header["__metadata__"] == {"format": "pt", "note": "ünï"}
    assert n % 8 == 0
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_layout_sorted_by_alignment_then_name():
    tensors = {"b": ember.ones(3), "a": ember.ones(2, dtype=ember.uint8), "c": ember.ones(1, dtype=ember.float64),
               "aa": ember.ones(1), "z": ember.ones(1, dtype=ember.bool), "i": ember.ones(1, dtype=ember.int64)}
    data = est.save(tensors)
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    assert list(header) == ["i", "c", "aa", "b", "a", "z"]
    assert data[8 + n - 1:8 + n] in (b" ", b"}")


def test_views_of_one_storage_that_do_not_overlap_are_fine():
    base = ember.arange(10.0)
    out = est.load(est.save({"lo": base[:5], "hi": base[5:], "none": base[:0]}))
    assert out["lo"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and out["hi"].tolist() == [5.0, 6.0, 7.0, 8.0, 9.0]


@pytest.mark.parametrize("tensors, exc, match", [
    ({"a": ember.ones(2, 3).t()}, ValueError, "non contiguous tensor: `a`"),
    ({"a": ember.arange(10.0)[::2]}, ValueError, "non contiguous"),
    ({"a": [1.0]}, ValueError, "Key `a` is invalid"),
    ({1: ember.ones(1)}, TypeError, "str"),
    ({"a": ember.empty(2, device="meta")}, NotImplementedError, "meta"),
])
def test_save_errors(tensors, exc, match):
    with pytest.raises(exc, match=match):
        est.save(tensors)


def test_overlapping_tensors_are_refused():
    base = ember.arange(10.0)
    for tensors in ({"a": base, "b": base}, {"a": base[:6], "b": base[4:]}):
        with pytest.raises(RuntimeError, match="share memory"):
            est.save(tensors)


@pytest.mark.parametrize("metadata", [{"a": 1}, {1: "a"}, ["x"]])
def test_bad_metadata(metadata):
    with pytest.raises(TypeError, match="metadata"):
        est.save({"a": ember.ones(1)}, metadata=metadata)


F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("data, match", [
    (b"", "header too small"),
    (b"\x08\x00\x00", "header too small"),
    (struct.pack("<Q", 200_000_000) + b"{}", "header too large"),
    (struct.pack("<Q", 100) + b"{}", "invalid header length"),
    (frame(None, raw_header=b"{not json"), "invalid JSON"),
    (frame(None, raw_header=b"\xff\xfe"), "invalid JSON"),
    (frame([1, 2]), "JSON object"),
    (frame({"a": 5}), "not an object"),
    (frame({"a": {**F32, "dtype": "F17"}}, b"\0" * 8), "unknown dtype"),
    (frame({"a": {**F32, "dtype": "U16", "data_offsets": [0, 4]}}, b"\0" * 4), "U16"),
    (frame({"a": {**F32, "shape": [3]}}, b"\0" * 8), "invalid shape, data type, or offset"),
    (frame({"a": {**F32, "shape": [-2]}}, b"\0" * 8), "invalid shape"),
    (frame({"a": {**F32, "shape": "2"}}, b"\0" * 8), "invalid shape"),
    (frame({"a": {**F32, "data_offsets": [8, 0]}}, b"\0" * 8), "data_offsets"),
    (frame({"a": {**F32, "data_offsets": [0, 8, 9]}}, b"\0" * 8), "data_offsets"),
    (frame({"a": {**F32, "data_offsets": [4, 12]}}, b"\0" * 12), "invalid offset for tensor `a`"),
    (frame({"a": F32, "b": {**F32, "data_offsets": [4, 12]}}, b"\0" * 12), "invalid offset"),
    (frame({"a": F32}, b"\0" * 12), "not fully covered"),
    (frame({"a": F32}, b"\0" * 4), "not fully covered"),
    (frame({"__metadata__": {"k": 1}, "a": F32}, b"\0" * 8), "__metadata__"),
    (frame({"a": {**F32, "shape": [2**40, 2**40]}}, b"\0" * 8), "invalid shape, data type, or offset"),
])
def test_read_validation(data, match, tmp_path):
    with pytest.raises(est.SafetensorError, match=match):
        est.load(data)
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(est.SafetensorError, match=match):
        est.load_file(path)


def test_truncated_files_fail_cleanly(tmp_path):
    data = est.save(sample(), metadata={"k": "v"})
    path = tmp_path / "cut.safetensors"
    for cut in range(0, len(data), 7):
        with pytest.raises(est.SafetensorError):
            est.load(data[:cut])
        path.write_bytes(data[:cut])
        with pytest.raises(est.SafetensorError):
            est.load_file(path)


def test_load_file_rejects_other_devices(tmp_path):
    path = tmp_path / "x.safetensors"
    est.save_file({"a": ember.ones(1)}, path)
    with pytest.raises(RuntimeError):
        est.load_file(path, device="cuda:0")
    with pytest.raises(RuntimeError):
        est.load_file(path, device=0)


def test_failed_save_file_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "w.safetensors"
    est.save_file({"old": ember.ones(2)}, path)
    before = path.read_bytes()
    calls = []

    def failing(t):
        calls.append(t)
        if len(calls) == 2:
            raise OSError("disk full")
        return memoryview(bytes(t.nbytes))

    monkeypatch.setattr(est, "_data", failing)
    with pytest.raises(OSError, match="disk full"):
        est.save_file({"a": ember.ones(2), "b": ember.ones(3)}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["w.safetensors"]
    with pytest.raises(ValueError):  # refused before any file is opened
        est.save_file({"a": ember.ones(2, 2).t()}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["w.safetensors"]


# -- the reference implementation as the oracle (when the safetensors package is installed) ---------

@pytest.fixture
def st():
    return pytest.importorskip("safetensors.torch", reason="the safetensors package is the oracle")


def torch_dict(tensors: dict) -> dict:
    return {k: to_torch(v) for k, v in tensors.items()}


# One metadata key at most: the reference writes metadata in hash-map order (it varies per process).
@pytest.mark.parametrize("metadata", [None, {}, {"é\n": 'q"\x01'}])
def test_bytes_identical_to_reference(st, metadata):
    tensors = sample()
    assert est.save(tensors, metadata=metadata) == st.save(torch_dict(tensors), metadata=metadata)


def test_reference_reads_ember_files_and_ember_reads_reference_files(st, tmp_path):
    tensors = sample()
    ours = tmp_path / "ours.safetensors"
    est.save_file(tensors, ours)
    loaded = st.load_file(ours)
    for k, v in tensors.items():
        torch.testing.assert_close(loaded[k], to_torch(v), rtol=0, atol=0)
    theirs = tmp_path / "theirs.safetensors"
    st.save_file(torch_dict(tensors), theirs, metadata={"a": "b"})
    assert_same_tensors(est.load_file(theirs), tensors)
    assert_same_tensors(est.load(theirs.read_bytes()), tensors)


def test_reference_rejects_what_ember_rejects(st):
    from safetensors import SafetensorError

    bad = [
        frame({"a": {**F32, "shape": [3]}}, b"\0" * 8),
        frame({"a": F32}, b"\0" * 12),
        frame({"a": {**F32, "data_offsets": [4, 12]}}, b"\0" * 12),
        frame({"a": F32, "b": {**F32, "data_offsets": [4, 12]}}, b"\0" * 12),
    ]
    for data in bad:
        with pytest.raises(SafetensorError):
            st.load(data)
        with pytest.raises(est.SafetensorError):
            est.load(data)


def test_header_matches_reference_with_several_metadata_keys(st):
    tensors = sample(("float32", "int8"))
    metadata = {"format": "pt", "b": "1", "a": "2"}

    def header(data):
        n = struct.unpack("<Q", data[:8])[0]
        return json.loads(data[8:8 + n]), data[8 + n:]

    ours, theirs = header(est.save(tensors, metadata)), header(st.save(torch_dict(tensors), metadata))
    assert ours == theirs


def test_bool_bytes_other_than_0_and_1_are_normalized(tmp_path):
    data = frame({"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, bytes([0, 7, 1]))
    path = tmp_path / "b.safetensors"
    path.write_bytes(data)
    for out in (est.load(data)["b"], est.load_file(path)["b"]):
        assert bytes(memoryview(out.untyped_storage())) == bytes([0, 1, 1])
