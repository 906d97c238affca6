"""Custom ``ember.autograd.Function``s, checked against the same Functions written for torch."""

from __future__ import annotations

import pytest
import torch
from ag_helpers import assert_close, leaf_pair

import ember
import ember.autograd as ag


def _make_cube(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * x * x * scale

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x * ctx.scale, None

    return Cube


def _make_exp_setup_context(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)  # a saved output: must not keep the graph alive by itself

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    return Exp


def test_ctx_style_matches_torch():
    ex, tx = leaf_pair((4,), seed=1)
    ey = _make_cube(ember).apply(ex, 2.0)
    ty = _make_cube(torch).apply(tx, 2.0)
    assert_close(ey, ty)
    assert ey.grad_fn.name() == "CubeBackward"
    assert ey.grad_fn.next_functions[0][0].variable is ex
    (ey * ey).sum().backward()
    (ty * ty).sum().backward()
    assert_close(ex.grad, tx.grad)


def test_setup_context_style_and_double_backward():
    ex, tx = leaf_pair((3,), "float64", seed=2)
    ey = _make_exp_setup_context(ember).apply(ex)
    ty = _make_exp_setup_context(torch).apply(tx)
    eg, = ag.grad(ey.sum(), ex, create_graph=True)
    tg, = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    assert_close(eg, tg)
    egg, = ag.grad(eg.sum(), ex)
    tgg, = torch.autograd.grad(tg.sum(), tx)
    assert_close(egg, tgg)


def test_needs_input_grad_and_non_tensor_args():
    seen = {}

    class F(ag.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen["needs"] = ctx.needs_input_grad
            return a * b * k

        @staticmethod
        def backward(ctx, grad):
            seen["backward_needs"] = ctx.needs_input_grad
            return grad, None, None

    a = ember.randn(3, requires_grad=True)
    out = F.apply(a, ember.randn(3), 2)
    assert seen["needs"] == (True, False, False)
    out.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]
    with ember.no_grad():
        assert F.apply(a, ember.randn(3), 2).grad_fn is None


def test_mark_non_differentiable_and_materialize_grads():
    seen = {}

    class SortLike(ag.Function):
        @staticmethod
        def forward(ctx, x):
            idx = (x > 0).to(ember.int64)
            doubled = x * 2
            ctx.mark_non_differentiable(idx)
            return doubled, idx, x * 3

        @staticmethod
        def backward(ctx, g0, g1, g2):
            seen["grads"] = (g0, g1, g2)
            return g0 * 2 + g2 * 3

    x = ember.randn(3, requires_grad=True)
    d, idx, t = SortLike.apply(x)
    assert not idx.requires_grad and d.requires_grad
    d.sum().backward()
    g0, g1, g2 = seen["grads"]
    assert g2.tolist() == [0.0, 0.0, 0.0]  # materialized zeros for the output that got no gradient
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_set_materialize_grads_false_passes_none():
    seen = {}

    class Two(ag.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, ga, gb):
            seen["gb"] = gb
            return ga

    x = ember.randn(2, requires_grad=True)
    a, _ = Two.apply(x)
    a.sum().backward()
    assert seen["gb"] is None


def test_mark_dirty_rebases_input():
    class AddOne(ag.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 5

    leaf = ember.randn(3, requires_grad=True)
    y = leaf * 1
    out = AddOne.apply(y)
    assert out is y and y.grad_fn.name() == "AddOneBackward"
    out.sum().backward()
    assert leaf.grad.tolist() == [5.0, 5.0, 5.0]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        AddOne.apply(ember.randn(3, requires_grad=True))


def test_returning_an_input_keeps_its_history():
    class Identity(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = ember.randn(3, requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and y.grad_fn.name() == "IdentityBackward"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_wrong_number_of_gradients():
    class Bad(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients \(expected 1, got 2\)"):
        Bad.apply(ember.randn(2, requires_grad=True)).sum().backward()


def test_saved_tensors_freed_after_backward():
    Cube = _make_cube(ember)
    x = ember.randn(2, requires_grad=True)
    y = Cube.apply(x, 1.0)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.sum().backward()


def test_saved_input_modified_raises():
    Cube = _make_cube(ember)
    x = ember.randn(2, requires_grad=True)
    a = x * 1
    y = Cube.apply(a, 1.0)
    with ember.no_grad():
        a.add_(1)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        y.sum().backward()


def test_once_differentiable():
    class Sq(ag.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @ag.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            assert not ember.is_grad_enabled()
            return grad * 2 * x

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    g, = ag.grad(Sq.apply(x).sum(), x)
    assert g.tolist() == [2.0, 4.0]
    g, = ag.grad(Sq.apply(x), x, grad_outputs=ember.ones(2, requires_grad=True), create_graph=True)
    assert g.requires_grad and g.grad_fn.name() == "DelayedError"
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with "
                                           "@once_differentiable"):
        g.sum().backward()


def _view_function(m, returns_input):
    class Out(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x if returns_input else x[:2]

        @staticmethod
        def backward(ctx, g):
            return g if returns_input else m.cat([g, g.new_zeros(1)])

    return Out


@pytest.mark.parametrize("returns_input", [False, True], ids=["view", "input"])
def test_inplace_on_custom_function_view_output_refused(returns_input):
    def run(m):
        x = m.ones(3, requires_grad=True) * 1
        out = _view_function(m, returns_input).apply(x)
        assert out._is_view() and out._base is x
        out.mul_(2)

    with pytest.raises(RuntimeError) as expected:
        run(torch)
    with pytest.raises(RuntimeError) as got:
        run(ember)
    assert str(got.value) == str(expected.value)


def test_inplace_on_custom_function_output_clone_allowed():
    def run(m):
        a = m.ones(3, requires_grad=True)
        out = _view_function(m, False).apply(a * 1).clone()
        out.mul_(2)
        out.sum().backward()
        return a.grad.tolist()

    assert run(ember) == run(torch)


def test_maybe_clear_saved_tensors_follows_retain_graph():
    # PyTorch's ctx.maybe_clear_saved_tensors(): frees the node's saved tensors inside backward
    # unless the backward run retains the graph (the oracle: torch, same program)

    def run(m):
        seen = []

        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x * 2)
                return x * 3

            @staticmethod
            def backward(ctx, g):
                (s,) = ctx.saved_tensors
                ctx.maybe_clear_saved_tensors()
                try:
                    _ = ctx.saved_tensors
                    seen.append("kept")
                except RuntimeError as e:
                    seen.append("freed" if "second time" in str(e) else str(e))
                return g * s

        x = m.ones(2, requires_grad=True)
        y = F.apply(x).sum()
        y.backward(retain_graph=True)
        y.backward()
        F.apply(x).sum().backward()
        return seen, x.grad.tolist()

    assert run(ember) == run(torch) == (["kept", "freed", "freed"], [6.0, 6.0])

@pytest.mark.parametrize("setup_style", [False, True])
def test_input_returned_and_marked_non_differentiable_is_a_detached_alias(setup_style):
    # PyTorch returns input.detach() for it: no grad, not a view in autograd's sense, the input
    # itself unchanged; the differentiable output still gets the gradient.
    def run(lib):
        if setup_style:
            class Pass(lib.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 3, x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.mark_non_differentiable(output[1])

                @staticmethod
                def backward(ctx, g, _):
                    return g * 3
        else:
            class Pass(lib.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.mark_non_differentiable(x)
                    return x * 3, x

                @staticmethod
                def backward(ctx, g, _):
                    return g * 3

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y, same = Pass.apply(x)
        facts = (same.requires_grad, same.is_leaf, same.grad_fn is None, same._base is x, same is x,
                 x.requires_grad, same.data_ptr() == x.data_ptr())
        y.sum().backward()
        return facts, x.grad.tolist()

    assert run(ember) == run(torch)


def _transform_errors(lib):
    class OldStyle(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class NoVmap(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Generated(NoVmap):
        generate_vmap_rule = True

    out = []
    for run in (lambda: lib.func.vmap(OldStyle.apply)(lib.ones(2, 3)),
                lambda: lib.func.grad(lambda t: OldStyle.apply(t).sum())(lib.ones(3)),
                lambda: lib.func.vmap(NoVmap.apply)(lib.ones(2, 3)),
                lambda: lib.func.grad(lambda t: NoVmap.apply(t).sum())(lib.ones(3)),
                lambda: lib.func.vmap(Generated.apply)(lib.ones(2, 3)),
                lambda: OldStyle.apply(lib.ones(2, requires_grad=True))):
        try:
            out.append(run().tolist())
        except RuntimeError as e:
            out.append(str(e))
    return out


def test_function_under_func_transforms_requires_what_torch_requires():
    assert _transform_errors(ember) == _transform_errors(torch)
