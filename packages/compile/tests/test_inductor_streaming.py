"""Streaming stores in row kernels (layer_norm's normalize pass): every row length, alignment and
dtype gives eager's values, with the size threshold lowered so that small inputs take the path."""

from __future__ import annotations

import re

import numpy as np
import pytest
from inductor_test_helpers import compile_program, make_input

import ember
from ember.compiler.inductor import config


@pytest.fixture
def always_stream(monkeypatch):
    monkeypatch.setattr(config.cpp, "streaming_min_bytes", 0)


def _layer_norm(m, x):
    return m.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-5) * 2 + 1


def _standardize(m, x):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / (x.var(-1, keepdim=True) + 1e-3).sqrt()


# rows shorter than one 64-byte block (a cache line), exactly one, unaligned starts with a tail,
# several blocks
@pytest.mark.parametrize("program,dtype,cols", [
    (_layer_norm, ember.float32, 3), (_layer_norm, ember.float32, 16), (_layer_norm, ember.float32, 13),
    (_layer_norm, ember.float32, 37), (_layer_norm, ember.float64, 8), (_layer_norm, ember.float64, 29),
    (_layer_norm, ember.float32, 100), (_standardize, ember.float32, 21), (_layer_norm, ember.float64, 13),
    (_standardize, ember.float64, 6),
])
def test_streaming_rows_match_eager(always_stream, program, dtype, cols):
    x = make_input((5, cols), dtype, seed=cols, specials=False)
    fn, _ = compile_program(program, [x])
    source = fn.artifact.cpp_source
    assert "ember_stream" in source  # the path under test is taken
    # whole cache lines: blocks of 64 bytes, each two 32-byte streaming stores
    assert re.search(rf"blk_\w+ \+= {64 // dtype.itemsize}\)", source) and "& 63)" in source
    got, want = fn(x), program(ember, x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_streaming_rows_of_strided_input(always_stream):
    base = make_input((6, 40), ember.float32, seed=3, specials=False)
    x = base[1:, 3:]  # rows start at unaligned addresses
    fn, _ = compile_program(_layer_norm, [x])
    np.testing.assert_allclose(fn(x).numpy(), _layer_norm(ember, x).numpy(), rtol=1e-5, atol=1e-5)


def test_small_outputs_keep_plain_stores():
    x = make_input((4, 64), ember.float32, specials=False)
    fn, _ = compile_program(_layer_norm, [x])
    # the threshold is checked at run time: the streaming block exists but a 1 KiB output skips it
    np.testing.assert_allclose(fn(x).numpy(), _layer_norm(ember, x).numpy(), rtol=1e-5, atol=1e-5)
    assert config.cpp.streaming_min_bytes == 8 << 20


def test_two_streamed_outputs_of_one_row(always_stream):
    def two(m, x):
        y = m.nn.functional.layer_norm(x, x.shape[-1:])
        return y * 2, y - 1

    x = make_input((3, 20), ember.float32, specials=False)
    fn, _ = compile_program(two, [x])
    assert fn.artifact.cpp_source.count("ember_stream_float(") >= 4  # two stores per line, per output
    for got, want in zip(fn(x), two(ember, x)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


# rows shorter than a line, unaligned with a tail, several lines, and past the local row array
# (8192 elements: the output itself holds the exp terms, as without streaming)
@pytest.mark.parametrize("cols", [3, 37, 100, 8193])
def test_softmax_stashes_its_terms_in_a_local_row_and_streams_the_output(always_stream, cols):
    def program(m, x):
        return [m.softmax(x, -1), m.softmax(x * 2, -1) + 1]

    x = make_input((3, cols), ember.float32, seed=cols, specials=cols < 64)
    fn, _ = compile_program(program, [x])
    source = fn.artifact.cpp_source
    assert source.count("scratch_buf") >= 4 and "ember_stream_float(" in source
    for got, want in zip(fn(x), program(ember, x)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7, equal_nan=True)
    offset = make_input((3, cols + 1), ember.float32, seed=1, specials=False)[:, 1:]  # unaligned rows
    fn, _ = compile_program(program, [offset])
    for got, want in zip(fn(offset), program(ember, offset)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
