"""``torch._dynamo.testing``'s backends that count and keep the graphs ``ember.compile`` captures,
which tutorials and tests use to see graph breaks and recompilations."""

from __future__ import annotations

from typing import Any

from ember.compiler.backends.registry import lookup_backend


def _count_ops(gm) -> int:
    return sum(1 for node in gm.graph.nodes if node.op.startswith("call_"))


class CompileCounter:
    """A backend running each graph as it is, counting the graphs (``frame_count``) and their
    calls (``op_count``)."""

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += _count_ops(gm)
        return gm.forward

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0


class CompileCounterWithBackend:
    """CompileCounter whose graphs are compiled by ``backend`` (a name or a callable); ``graphs``
    keeps them."""

    def __init__(self, backend: Any) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.backend = backend
        self.graphs: list = []

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += _count_ops(gm)
        self.graphs.append(gm)
        return lookup_backend(self.backend)(gm, example_inputs)

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs = []


class EagerAndRecordGraphs:
    """A backend running each graph as it is and keeping it in ``graphs``."""

    def __init__(self) -> None:
        self.graphs: list = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def same(ref, res, fp64_ref=None, cos_similarity: bool = False, tol: float = 1e-4, equal_nan: bool = False,
         exact_dtype: bool = True, relax_numpy_equality: bool = False, ignore_non_fp: bool = False,
         log_error=None, use_larger_multiplier_for_smaller_tensor: bool = False, force_max_multiplier: bool = False
         ) -> bool:
    """Whether two results (tensors, numbers, nested lists/tuples/dicts) agree within ``tol``."""
    import ember

    if isinstance(ref, (list, tuple)):
        return (isinstance(res, (list, tuple)) and len(ref) == len(res)
                and all(same(a, b, tol=tol, equal_nan=equal_nan, exact_dtype=exact_dtype) for a, b in zip(ref, res)))
    if isinstance(ref, dict):
        return (isinstance(res, dict) and set(ref) == set(res)
                and all(same(ref[k], res[k], tol=tol, equal_nan=equal_nan, exact_dtype=exact_dtype) for k in ref))
    if isinstance(ref, ember.Tensor):
        if not isinstance(res, ember.Tensor) or ref.shape != res.shape:
            return False
        if exact_dtype and ref.dtype != res.dtype:
            return False
        if ref.dtype.is_floating_point or ref.dtype.is_complex:
            return bool(ember.allclose(ref, res.to(ref.dtype), rtol=tol, atol=tol, equal_nan=equal_nan))
        return bool(ember.equal(ref, res.to(ref.dtype)))
    if isinstance(ref, float):
        return abs(ref - res) <= tol * max(1.0, abs(ref)) or (equal_nan and ref != ref and res != res)
    return ref == res


def reset_rng_state(use_xla: bool = False) -> None:
    import random

    import ember

    ember.manual_seed(1337)
    random.seed(1337)


__all__ = ["CompileCounter", "CompileCounterWithBackend", "EagerAndRecordGraphs", "reset_rng_state", "same"]
