"""``torch.export.Constraint`` (a union of dataclasses in torch 2.13) against torch's."""

import typing

import pytest
import torch as real
from torch.export import dynamic_shapes as tds  # noqa: E402  (the oracle)

import ember
from ember.export import dynamic_shapes as eds
from ember.export._constraints import _process_dynamic_shapes as ember_process


def _specs(lib, ds_mod, process, case):
    x = lib.zeros(4, 3)
    y = lib.zeros(5, 3)
    z = lib.zeros(8)
    b = ds_mod.Dim("b", min=2, max=10)
    n = ds_mod.Dim("n", max=40)
    shapes = {
        "plain": ({"x": x, "y": y}, {"x": {0: b, 1: 3}, "y": {0: b + 1, 1: ds_mod.Dim.AUTO}}),
        "phantom": ({"z": z, "y": y}, {"z": (2 * n,), "y": (2 * n + 1, None)}),
        "tuple": ({"x": x, "y": y}, ({0: b}, [b + 1, ds_mod.Dim.DYNAMIC])),
        "none": ({"x": x}, None),
    }
    args, spec = shapes[case]
    ids = {id(v): k for k, v in args.items()}
    out = []
    for c in process(args, spec):
        root = getattr(c, "root", None)
        if root is not None:
            root = (type(root).__name__, ids.get(getattr(root, "t_id", None)), getattr(root, "dim", None),
                    getattr(root, "name", None), getattr(root, "val", None))
        s = c.serializable_spec
        s["t_id"] = ids[s["t_id"]]
        out.append((type(c).__name__, s, getattr(c, "name", None), root))
    return out


@pytest.mark.parametrize("case", ["plain", "phantom", "tuple", "none"])
def test_process_dynamic_shapes_matches_torch(case):
    got = _specs(ember, eds, ember_process, case)
    want = _specs(real, tds, tds._process_dynamic_shapes, case)
    assert got == want


def test_constraint_is_the_union_torch_names():
    assert "Constraint" in ember.export.__all__ and "Constraint" in eds.__all__
    assert ember.export.Constraint is eds.Constraint
    got = [t.__name__ for t in typing.get_args(ember.export.Constraint)]
    want = [t.__name__ for t in typing.get_args(real.export.Constraint)]
    assert got == want == ["_Constraint", "_DerivedConstraint", "_RelaxedConstraint"]
    x = ember.zeros(3)
    c = ember_process({"x": x}, {"x": {0: eds.Dim("b", min=2, max=10)}})[0]
    assert isinstance(c, ember.export.Constraint)


def test_constraint_range_ops_and_truth_value():
    from torch.fx.experimental.symbolic_shapes import StrictMinMaxConstraint
    from torch.utils._sympy.value_ranges import ValueRanges

    from ember.export._constraints import _Constraint, _strict

    e = _Constraint(7, 0, "b", _strict(2, 10))
    t = tds._Constraint(7, 0, "b", StrictMinMaxConstraint(vr=ValueRanges(2, 10), warn_only=False))
    for op in (lambda c: c >= 3, lambda c: c > 3, lambda c: c <= 8, lambda c: c < 8, lambda c: (c >= 4) < 6):
        assert op(e).serializable_spec == op(t).serializable_spec
    assert repr(e) == repr(t)
    for c in (e, t):
        with pytest.raises(TypeError, match="Cannot determine truth value of _Constraint"):
            bool(c)


def test_phantom_root_of_wrong_form_raises():
    from ember.export import UserError

    n = eds.Dim("n")
    msg = r"Expected shape\[0\] = 7 of input Tensor to be of the form 2\*n, where n is an integer"
    with pytest.raises(UserError, match=msg):
        ember_process({"z": ember.zeros(7)}, {"z": (2 * n,)})
    with pytest.raises(real._dynamo.exc.UserError, match=msg):
        tds._process_dynamic_shapes({"z": real.zeros(7)}, {"z": (2 * tds.Dim("n"),)})
