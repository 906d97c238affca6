"""A seeded fuzzer: random pointwise/reduction/view graphs, compiled vs eager ember.

Each graph starts from a few inputs (broadcastable shapes, sometimes non-contiguous) and
applies random ops; every intermediate may become an output. The CI run is small (a few
graphs, one compile each); ``EMBER_FUZZ_GRAPHS=200`` runs a longer campaign.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from inductor_test_helpers import assert_close, compile_program

import ember

UNARY = ["exp", "tanh", "sigmoid", "relu", "abs", "neg", "sin", "sqrt", "log1p", "square", "floor", "erf"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "lt", "eq"]
REDUCE = ["sum", "mean", "amax", "amin"]


def _random_program(rng: random.Random, n_ops: int):
    """A program over ``m`` (ember) as a list of steps; returns (program, input shapes)."""
    rows, cols = rng.choice([1, 3, 8]), rng.choice([1, 5, 16])
    shapes = [(rows, cols), (cols,), (rows, 1)]
    steps = []
    for _ in range(n_ops):
        kind = rng.choice(["unary", "binary", "binary", "reduce", "view", "scalar"])
        steps.append((kind, rng.choice(UNARY), rng.choice(BINARY), rng.choice(REDUCE), rng.random(), rng.random()))

    def program(m, *inputs):
        values = list(inputs)
        outputs = []
        for kind, unary, binary, reduce, r1, r2 in steps:
            a = values[int(r1 * len(values))]
            b = values[int(r2 * len(values))]
            if kind == "unary":
                v = getattr(m, unary)(a.abs() + 0.5 if unary in ("sqrt", "log1p") else a)
            elif kind == "binary":
                v = getattr(m, binary)(a, b)
                v = v.float() if v.dtype is m.bool else v
            elif kind == "reduce":
                dim = int(r2 * a.dim()) if a.dim() else None
                if reduce in ("amax", "amin"):
                    v = getattr(m, reduce)(a, dim if dim is not None else (), keepdim=r1 > 0.5)
                else:
                    v = getattr(m, reduce)(a, dim, keepdim=r1 > 0.5) if dim is not None else getattr(m, reduce)(a)
            elif kind == "view":
                v = a.t() if a.dim() == 2 else a.unsqueeze(0)
            else:
                v = a * (r2 * 4 - 2) + 1
            values.append(v)
            if r1 > 0.6:
                outputs.append(v)
        outputs.append(values[-1])
        return outputs

    return program, shapes


def _inputs(shapes, seed):
    g = np.random.default_rng(seed)
    out = []
    for i, s in enumerate(shapes):
        data = g.standard_normal(s).astype(np.float32)
        t = ember.tensor(data)
        if i == 0 and len(s) == 2 and seed % 2:
            t = ember.tensor(np.ascontiguousarray(data.T)).t()  # same values, transposed strides
        out.append(t)
    return out


def draw_program(rng, seed):
    """(program, inputs, eager outputs): drawn until a program is valid eagerly (shapes can
    clash after a transpose); the Triton backend's fuzz case draws its graphs here too."""
    for _ in range(50):
        program, shapes = _random_program(rng, rng.randint(4, 10))
        inputs = _inputs(shapes, seed)
        try:
            return program, inputs, program(ember, *inputs)
        except RuntimeError:
            continue
    raise AssertionError("no valid program drawn")


GRAPHS = int(os.environ.get("EMBER_FUZZ_GRAPHS", "6"))


@pytest.mark.parametrize("seed", range(GRAPHS))
def test_random_graph_matches_eager(seed):
    program, inputs, want = draw_program(random.Random(1000 + seed), seed)
    compiled, _ = compile_program(program, inputs)
    assert compiled.artifact is not None
    got = compiled(*inputs)
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=1e-4, atol=1e-5, what=f"seed {seed} output {i}")
