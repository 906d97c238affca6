"""``TypedStorage.from_buffer``/``_from_buffer`` and the legacy classes' (``ByteStorage._from_buffer(raw)``,
accelerate's object broadcast) against torch 2.13."""

from __future__ import annotations

import warnings

import pytest
import torch

import ember

_CASES = [
    ("ByteStorage", (b"abc",), {}), ("FloatStorage", (b"\x00\x00\x80\x3f" * 2, "little"), {}),
    ("FloatStorage", (b"\x3f\x80\x00\x00", "big"), {}), ("ByteStorage", (b"ab",), {"dtype": "uint8"}),
    ("ByteStorage", (b"ab",), {"device": "cpu"}), ("TypedStorage", (b"\x00\x00\x80\x3f", "little"), {}),
    ("TypedStorage", (b"\x01\x02",), {"dtype": "int8"}),
    ("TypedStorage", (b"\x01\x02",), {"dtype": "int8", "device": "meta"}),
    ("FloatStorage", (b"abc", "little"), {}), ("LongStorage", (b"a" * 8,), {}),
    ("DoubleStorage", (b"\x00" * 16, "native"), {"count": 1, "offset": 8}),
]


def _run(lib, cls_name, args, kwargs, public):
    cls = lib.storage.TypedStorage if cls_name == "TypedStorage" else getattr(lib, cls_name)
    kwargs = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
    with warnings.catch_warnings():  # the deprecation warning comes once per process, in both
        warnings.simplefilter("ignore")
        try:
            s = (cls.from_buffer if public else cls._from_buffer)(*args, **kwargs)
            return type(s).__name__, str(s.dtype).split(".")[1], s.tolist()
        except Exception as e:  # noqa: BLE001 - compared with torch's
            return type(e).__name__, str(e)


@pytest.mark.parametrize("public", [False, True])
@pytest.mark.parametrize("case", range(len(_CASES)))
def test_from_buffer_as_torch(case, public):
    want = _run(torch, *_CASES[case], public)
    got = _run(ember, *_CASES[case], public)
    assert got == want
