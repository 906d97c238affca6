"""The op table: records, schema signatures and argument checks, and the public API generated
from them (none of today's public names may disappear)."""

import json
import pathlib

import pytest

import ember
from ember._src import bindings, optable, torch_function
from ember._src.dispatch import OPS, define
from ember._src.optable import Signature

_SNAPSHOT = json.loads((pathlib.Path(__file__).parent / "public_names.json").read_text())
_NAMESPACES = {"ember": ember, "Tensor": ember.Tensor, "special": ember.special, "linalg": ember.linalg,
               "fft": ember.fft}


@pytest.mark.parametrize("namespace", sorted(_NAMESPACES))
def test_no_public_name_disappears(namespace):
    """Every name ember.*, Tensor, ember.special/linalg/fft had when the API became generated."""
    target = _NAMESPACES[namespace]
    missing = [name for name in _SNAPSHOT[namespace] if not hasattr(target, name)]
    assert not missing, f"{namespace} lost {missing}"


def _binds(bound, implementation) -> bool:
    """``bound`` is ``implementation``, or its gate once the __torch_function__ protocol is on (a
    Tensor subclass defined by an earlier test switches it on): the gates unwrap to it."""
    while bound is not implementation and hasattr(bound, "__wrapped__"):
        bound = bound.__wrapped__
    return bound is implementation


def test_every_record_binds_what_it_declares():
    for record in optable.RECORDS:
        names = (record.name, *record.aliases)
        for name in names:
            if "function" in record.variants:
                assert _binds(getattr(ember, name), record.fn), name
            if "method" in record.variants:
                bound = ember.Tensor.__dict__[name]
                if name in bindings.OPERATOR_NAMES and not torch_function.is_enabled():
                    bound = bound.__wrapped__  # wrapped: TypeError -> NotImplemented
                    assert bound is record.method, name
                assert _binds(bound, record.method), name
            if "inplace" in record.variants:
                assert callable(ember.Tensor.__dict__[name + "_"]), name
        for ns, ns_names in record.namespaces.items():
            for name in ns_names:
                assert _binds(getattr(getattr(ember, ns), name), record.fn)


def test_aliases_and_special_names_share_one_implementation():
    assert ember.special.expit is ember.sigmoid
    assert ember.special.gammainc is ember.igamma
    assert ember.Tensor.subtract_ is ember.Tensor.sub_
    assert ember.Tensor.divide_ is ember.Tensor.true_divide_ is ember.Tensor.div_


def test_a_place_is_bound_by_one_record_only():
    op = define("toy_claimed(Tensor self) -> Tensor", differentiable=False)
    try:
        with pytest.raises(ValueError, match="bound by two op records"):
            bindings._bind_function({}, "add", op, op)
    finally:
        del OPS["toy_claimed"]


def test_schema_parses_once_into_a_signature():
    sig = Signature.parse("sum.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
    assert [p.name for p in sig.params] == ["self", "dim", "keepdim", "dtype"]
    assert [p.keyword_only for p in sig.params] == [False, False, False, True]
    assert sig.by_name["keepdim"].default is False and sig.by_name["dim"].optional
    assert str(sig) == "(Tensor self, tuple of ints? dim, bool keepdim = False, *, torch.dtype? dtype = None)"
    x = ember.ones(2)
    sig.check((x, (0,)), {"dtype": ember.float32})
    sig.check((x, None, True), {})
    with pytest.raises(TypeError, match="got \\(Tensor, str\\)"):
        sig.check((x, "0"), {})
    with pytest.raises(TypeError, match="unexpected keyword argument 'dims'"):
        sig.check((x,), {"dims": 0})
    with pytest.raises(TypeError, match="torch.dtype"):
        sig.check((x, 0), {"dtype": "float32"})
    with pytest.raises(TypeError, match="missing required argument 'self'"):
        sig.check((), {})


def test_every_op_schema_parses():
    for name, op in OPS.items():
        sig = Signature.parse(op.schema)
        assert sig.name == name, op.schema
        assert all(p.name.isidentifier() for p in sig.params), op.schema


def test_records_of_python_functions_have_signatures():
    record = next(r for r in optable.RECORDS if r.name == "clamp_min_")
    assert [p.name for p in record.signature.params] == ["input", "min"]


def test_wrong_argument_types_raise_type_error_as_pytorch():
    for m in (ember, pytest.importorskip("torch")):
        with pytest.raises(TypeError):
            m.zeros(2, dtype="float32")
        with pytest.raises(TypeError):
            m.ones(2).sum(dimz=0)


def test_declared_writes():
    assert OPS["add_"].writes == ("self",)
    assert OPS["add"].writes == ()
    assert OPS["native_batch_norm"].writes == ("running_mean", "running_var")  # hidden: not returned
    op = define("toy_writes(Tensor(a!) self, Tensor running) -> Tensor(a!)", writes=("running",))
    try:
        assert op.writes == ("self", "running")
    finally:
        del OPS["toy_writes"]


def test_table_lines_are_checked():
    with pytest.raises(ValueError, match="unknown variants"):
        optable.declare(__name__, "toy_bad  function methd")
    with pytest.raises(ValueError, match="unknown keys"):
        optable.declare(__name__, "toy_bad2  function speical=x")
    optable.forget("toy_bad")
    optable.forget("toy_bad2")
    assert not any(r.name.startswith("toy_bad") for r in optable.RECORDS)
