"""Guards ``size != c`` the tracer decides: checked by ``ep.module()`` for AUTO/DYNAMIC dims,
a constraint violation for a named Dim, as torch 2.13 does."""

import io

import pytest
import torch as real

import ember


def _models(lib):
    class NotFive(lib.nn.Module):
        def forward(self, x):
            if x.shape[0] != 5:
                return x + 1
            return x - 1

    class HalfSlice(lib.nn.Module):
        def forward(self, x):
            return x[: x.shape[0] // 2] * 2

    return {"not_five": NotFive, "half_slice": HalfSlice}


def _outcomes(lib, name, hint, sizes=(2, 3, 4, 5, 7)):
    ep = lib.export.export(_models(lib)[name](), (lib.ones(10, 3),),
                           dynamic_shapes=({0: getattr(lib.export.Dim, hint)},))
    out = []
    for n in sizes:
        try:
            out.append(tuple(ep.module()(lib.ones(n, 3)).shape))
        except AssertionError as e:
            out.append(str(e))
    return ep, out


@pytest.mark.parametrize("name", ["not_five", "half_slice"])
@pytest.mark.parametrize("hint", ["AUTO", "DYNAMIC"])
def test_module_checks_the_guards_like_torch(name, hint):
    ep, got = _outcomes(ember, name, hint)
    _, want = _outcomes(real, name, hint)
    assert got == want
    assert any(isinstance(o, str) for o in want)  # some size is refused
    buf = io.BytesIO()  # the guards travel through save/load
    ember.export.save(ep, buf)
    buf.seek(0)
    loaded = ember.export.load(buf)
    again = []
    for n in (2, 3, 4, 5, 7):
        try:
            again.append(tuple(loaded.module()(ember.ones(n, 3)).shape))
        except AssertionError as e:
            again.append(str(e))
    assert again == want


@pytest.mark.parametrize("lo", [None, 4])
def test_a_named_dim_whose_range_holds_the_excluded_size_is_refused(lo):
    b = ember.export.Dim("b", min=lo)
    with pytest.raises(ember.export.UserError, match=r"Not all values of b .*satisfy the generated guard b != 5"):
        ember.export.export(_models(ember)["not_five"](), (ember.ones(10, 3),), dynamic_shapes=({0: b},))
    tb = real.export.Dim("b", min=lo)
    with pytest.raises(real._dynamo.exc.UserError, match=r"Not all values of b .*satisfy the generated guard"):
        real.export.export(_models(real)["not_five"](), (real.ones(10, 3),), dynamic_shapes=({0: tb},))


def test_a_named_dim_whose_range_excludes_it_exports():
    b = ember.export.Dim("b", min=6)
    ep = ember.export.export(_models(ember)["not_five"](), (ember.ones(10, 3),), dynamic_shapes=({0: b},))
    tb = real.export.Dim("b", min=6)
    tep = real.export.export(_models(real)["not_five"](), (real.ones(10, 3),), dynamic_shapes=({0: tb},))
    assert ep.module()(ember.ones(7, 3)).tolist() == tep.module()(real.ones(7, 3)).tolist()


def test_jit_trace_keeps_no_such_guard_like_torch():
    def run(lib):
        traced = lib.jit.trace(_models(lib)["not_five"](), (lib.zeros(4, 3),))
        return [traced(lib.zeros(n, 3))[0, 0].item() for n in (4, 5, 6)]

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's TracerWarning
        assert run(ember) == run(real) == [1.0, 1.0, 1.0]
