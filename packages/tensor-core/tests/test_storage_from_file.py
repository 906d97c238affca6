"""UntypedStorage.from_buffer / from_file, TypedStorage.from_file and torch.from_file against
PyTorch 2.13: values, sizes, sharing with the file, and the error types and messages."""
import os
import warnings

import pytest
import torch

import ember


def _outcome(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    if not hasattr(r, "dtype") or hasattr(r, "_untyped_storage") or type(r).__name__ == "TypedStorage":
        untyped = r.untyped() if hasattr(r, "untyped") and not hasattr(r, "nbytes") else r
        untyped = untyped._untyped_storage if hasattr(untyped, "_untyped_storage") else untyped
        return "storage", untyped.nbytes(), untyped.tolist()
    return "tensor", str(r.dtype).split(".")[-1], r.tolist(), r.requires_grad


BUFFER_CASES = {
    "u8": lambda L: L.UntypedStorage.from_buffer(bytes(range(8)), dtype=L.uint8),
    "u8_count_offset": lambda L: L.UntypedStorage.from_buffer(bytes(range(8)), dtype=L.uint8, count=3, offset=2),
    "u8_offset_end": lambda L: L.UntypedStorage.from_buffer(bytes(range(8)), dtype=L.uint8, offset=8),
    "i16_big": lambda L: L.UntypedStorage.from_buffer(bytes(range(8)), byte_order="big", dtype=L.int16),
    "i16_little": lambda L: L.UntypedStorage.from_buffer(bytes(range(8)), "little", dtype=L.int16),
    "f64_offset": lambda L: L.UntypedStorage.from_buffer(bytes(range(16)), "native", dtype=L.float64, count=1,
                                                         offset=8),
    "c64_big": lambda L: L.UntypedStorage.from_buffer(bytes(range(16)), byte_order="big", dtype=L.complex64),
    "copies": lambda L: (lambda b: (L.UntypedStorage.from_buffer(b, dtype=L.uint8), b.__setitem__(0, 9))[0])(
        bytearray(4)),
    "no_dtype": lambda L: L.UntypedStorage.from_buffer(b"abcd"),
    "no_byte_order": lambda L: L.UntypedStorage.from_buffer(bytes(8), dtype=L.float32),
    "bool_no_byte_order": lambda L: L.UntypedStorage.from_buffer(b"\x00\x01", dtype=L.bool),
    "bad_byte_order": lambda L: L.UntypedStorage.from_buffer(bytes(8), byte_order="middle", dtype=L.int16),
    "not_multiple": lambda L: L.UntypedStorage.from_buffer(b"abc", byte_order="little", dtype=L.float32),
    "count_too_big": lambda L: L.UntypedStorage.from_buffer(bytes(8), dtype=L.uint8, count=9),
    "negative_offset": lambda L: L.UntypedStorage.from_buffer(bytes(8), dtype=L.uint8, offset=-1),
    "not_a_buffer": lambda L: L.UntypedStorage.from_buffer([1, 2], dtype=L.uint8),
}


@pytest.mark.parametrize("case", list(BUFFER_CASES))
def test_from_buffer_matches_torch(case):
    assert _outcome(lambda: BUFFER_CASES[case](ember)) == _outcome(lambda: BUFFER_CASES[case](torch))


FILE_CASES = {
    "storage": lambda L, p: L.UntypedStorage.from_file(p, False, 16),
    "storage_default_size": lambda L, p: L.UntypedStorage.from_file(p),
    "storage_kwargs": lambda L, p: L.UntypedStorage.from_file(filename=p, shared=False, nbytes=4),
    "storage_too_big": lambda L, p: L.UntypedStorage.from_file(p, False, 32),
    "storage_missing": lambda L, p: L.UntypedStorage.from_file(p + ".none", False, 4),
    "storage_directory": lambda L, p: L.UntypedStorage.from_file(os.path.dirname(p), False, 4),
    "typed": lambda L, p: L.IntStorage.from_file(p, False, 2),
    "tensor": lambda L, p: L.from_file(p, size=4, dtype=L.int16),
    "tensor_shared_none": lambda L, p: L.from_file(p, shared=None, size=2, dtype=L.int32),
    "tensor_default": lambda L, p: L.from_file(p),
    "tensor_requires_grad": lambda L, p: L.from_file(p, size=2, dtype=L.float32, requires_grad=True),
    "tensor_too_big": lambda L, p: L.from_file(p, size=8, dtype=L.float32),
    "tensor_missing": lambda L, p: L.from_file(p + ".none", size=4),
}


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_from_file_matches_torch(case, tmp_path):
    results = []
    for lib in (ember, torch):
        path = str(tmp_path / f"{lib.__name__}.bin")
        with open(path, "wb") as f:
            f.write(bytes(range(16)))
        out = _outcome(lambda lib=lib, path=path: FILE_CASES[case](lib, path))
        results.append(out if out[0] != "RuntimeError" else (out[0], out[1].replace(path, "P")))
    assert results[0] == results[1]


def test_from_file_shared_writes_reach_the_file(tmp_path):
    for lib in (ember, torch):
        path = str(tmp_path / f"{lib.__name__}.bin")
        with open(path, "wb") as f:
            f.write(bytes(range(8)))
        private = lib.from_file(path, shared=False, size=8, dtype=lib.uint8)
        private[0] = 100
        shared = lib.from_file(path, shared=True, size=8, dtype=lib.uint8)
        shared[1] = 101
        del private, shared
        with open(path, "rb") as f:
            assert f.read() == bytes([0, 101, 2, 3, 4, 5, 6, 7]), lib.__name__
        created = str(tmp_path / f"{lib.__name__}.new")
        grown = lib.UntypedStorage.from_file(created, True, 12)  # shared: created, sized to nbytes
        assert grown.nbytes() == 12 and os.path.getsize(created) == 12


@pytest.mark.parametrize("device", ["mps", "xpu"])
def test_missing_backend_error_types_match_torch(device):
    """A device type no installed package provides: torch's CPU build raises NotImplementedError from
    a factory on 'mps' (a RuntimeError) and AssertionError on 'xpu'."""
    kinds = []
    for lib in (torch, ember):
        with pytest.raises(Exception) as info:
            lib.ones(2, device=device)
        kinds.append(type(info.value))
        if device == "mps":
            assert isinstance(info.value, RuntimeError) and "'MPS' backend" in str(info.value)
    assert kinds[0] is kinds[1]
