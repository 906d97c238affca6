"""ember.library (torch.library): custom ops eagerly, under autograd, make_fx, ember.compile and vmap,
the low-level Library API and opcheck; torch 2.13's torch.library is the oracle."""

import itertools
from collections.abc import Sequence
from typing import Optional

import numpy as np
import pytest
import torch

import ember
from ember import library
from ember.compiler import make_fx

_COUNT = itertools.count()


def _ns() -> str:
    return f"embertest{next(_COUNT)}"  # each test its own namespace (ops live for the whole process)


def _define_scale(lib, ns):
    """The same op in both libraries: a scaled sine, with fake, autograd and (optionally) vmap rules."""
    Tensor = lib.Tensor

    @lib.library.custom_op(f"{ns}::scaled_sin", mutates_args=())
    def scaled_sin(x: Tensor, factor: float) -> Tensor:
        return x.sin() * factor

    @scaled_sin.register_fake
    def _(x, factor):
        return lib.empty_like(x)

    def setup_context(ctx, inputs, output):
        x, factor = inputs
        ctx.save_for_backward(x)
        ctx.factor = factor

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * ctx.factor, None

    scaled_sin.register_autograd(backward, setup_context=setup_context)
    return scaled_sin


def test_schemas_inferred_like_torch():
    def f1(x: ember.Tensor, y: float, n: int = 2) -> ember.Tensor: ...
    def f2(x: ember.Tensor, out: ember.Tensor) -> None: ...
    def f3(x: ember.Tensor, ys: Sequence[ember.Tensor], w: Optional[ember.Tensor] = None, *,  # noqa: UP045
           flag: bool = False) -> tuple[ember.Tensor, ember.Tensor]: ...
    def f4(x: ember.Tensor, dims: list[int]) -> list[ember.Tensor]: ...

    def t1(x: torch.Tensor, y: float, n: int = 2) -> torch.Tensor: ...
    def t2(x: torch.Tensor, out: torch.Tensor) -> None: ...
    def t3(x: torch.Tensor, ys: Sequence[torch.Tensor], w: Optional[torch.Tensor] = None, *,  # noqa: UP045
           flag: bool = False) -> tuple[torch.Tensor, torch.Tensor]: ...
    def t4(x: torch.Tensor, dims: list[int]) -> list[torch.Tensor]: ...

    for ours, theirs, mutates in ((f1, t1, ()), (f2, t2, {"out"}), (f3, t3, ()), (f4, t4, ())):
        assert library.infer_schema(ours, mutates_args=mutates) == torch.library.infer_schema(
            theirs, mutates_args=mutates)
    assert library.infer_schema(f1, op_name="foo", mutates_args=()) == torch.library.infer_schema(
        t1, op_name="foo", mutates_args=())
    with pytest.raises(ValueError, match="type annotation"):
        library.infer_schema(lambda x: x, mutates_args=())


def test_custom_op_eager_autograd_and_opcheck_match_torch():
    ns = _ns()
    op_e, op_t = _define_scale(ember, ns), _define_scale(torch, ns)
    data = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    xe = ember.from_numpy(data.copy()).requires_grad_()
    xt = torch.from_numpy(data.copy()).requires_grad_()
    ye, yt = op_e(xe, 2.5), op_t(xt, 2.5)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5)
    assert getattr(ember.ops, ns).scaled_sin is op_e._opoverload
    # torch's test_aot_dispatch_dynamic costs ~30 s here: the three cheap checks are compared, ours all run
    cheap = ("test_schema", "test_autograd_registration", "test_faketensor")
    assert library.opcheck(op_e, (ember.randn(3, requires_grad=True), 2.0), test_utils=cheap) == \
        torch.library.opcheck(op_t, (torch.randn(3, requires_grad=True), 2.0), test_utils=cheap)
    assert set(library.opcheck(op_e, (ember.randn(3, requires_grad=True), 2.0)).values()) == {"SUCCESS"}


def test_custom_op_is_one_node_under_make_fx_and_compile():
    ns = _ns()
    op = _define_scale(ember, ns)
    x = ember.randn(4)
    gm = make_fx(lambda v: op(v, 3.0).relu())(x)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets[0] is op._opoverload and len(targets) == 2
    for backend in ("aot_eager", "inductor"):
        f = ember.compile(lambda v: op(v * 2, 3.0).relu(), backend=backend, fullgraph=True)
        ember.testing.assert_close(f(x), ((x * 2).sin() * 3).relu())
        xg = x.clone().requires_grad_()
        f(xg).sum().backward()
        expected = ((x * 2).sin() * 3 > 0) * (x * 2).cos() * 6
        ember.testing.assert_close(xg.grad, expected)


def test_mutating_op_and_missing_registrations_error_like_torch():
    ns = _ns()
    for lib in (ember, torch):
        Tensor = lib.Tensor

        @lib.library.custom_op(f"{ns}::add_into", mutates_args={"out"})
        def add_into(x: Tensor, out: Tensor) -> None:
            out.add_(x)

        @lib.library.custom_op(f"{ns}::twice", mutates_args=())
        def twice(x: Tensor) -> Tensor:
            return x * 2

        out = lib.zeros(3)
        add_into(lib.ones(3), out)
        add_into(lib.ones(3), out)
        assert out.tolist() == [2.0, 2.0, 2.0]
        y = twice(lib.ones(3, requires_grad=True))
        with pytest.raises(RuntimeError, match="no autograd formula was registered"):
            y.sum().backward()
        with pytest.raises(RuntimeError, match="no fake impl registered"):
            lib.compile(lambda v: twice(v) + 1, backend="eager", fullgraph=True)(lib.ones(3))
    # the write is recorded: traced, the op updates the buffer passed in
    add_into_e = getattr(ember.ops, ns).add_into
    gm = make_fx(lambda x, o: add_into_e(x, o))(ember.ones(3), ember.zeros(3))
    out = ember.zeros(3)
    gm(ember.full((3,), 4.0), out)
    assert out.tolist() == [4.0, 4.0, 4.0]


def test_opcheck_finds_an_undeclared_mutation_like_torch():
    ns = _ns()
    for lib in (ember, torch):
        Tensor = lib.Tensor

        @lib.library.custom_op(f"{ns}::sneaky", mutates_args=())
        def sneaky(x: Tensor) -> Tensor:
            x.mul_(2)
            return x.clone()

        @sneaky.register_fake
        def _(x, empty_like=lib.empty_like):
            return empty_like(x)

        result = lib.library.opcheck(sneaky, (lib.ones(3),), raise_exception=False)
        assert result["test_schema"] != "SUCCESS"
        assert result["test_faketensor"] == "SUCCESS"


def test_low_level_library_define_impl_and_register_kernel():
    ns = _ns()
    results = {}
    for lib in (ember, torch):
        my_lib = lib.library.Library(ns, "FRAGMENT")
        my_lib.define("cube(Tensor x, *, float shift=0.0) -> Tensor")
        my_lib.impl("cube", lambda x, *, shift=0.0: x * x * x + shift, "CPU")
        lib.library.register_fake(f"{ns}::cube", lambda x, *, shift=0.0, e=lib.empty_like: e(x))
        lib.library.register_autograd(f"{ns}::cube", lambda ctx, g: g * 3 * ctx.x * ctx.x,
                                      setup_context=lambda ctx, inputs, output, keyword_only_inputs: setattr(
                                          ctx, "x", inputs[0]))
        op = getattr(lib.ops, ns).cube
        x = lib.tensor([1.0, -2.0, 0.5], requires_grad=True)
        y = op(x, shift=1.0)
        y.sum().backward()
        results[lib.__name__] = (y.detach().tolist(), x.grad.tolist())
        my_lib._destroy() if lib is ember else None
    assert results["ember"] == results["torch"]
    with pytest.raises(ValueError):
        library.Library(ns, "NOPE")


def test_register_vmap_and_kernel_per_device():
    ns = _ns()

    @library.custom_op(f"{ns}::rowsum", mutates_args=(), device_types="cpu")
    def rowsum(x: ember.Tensor) -> ember.Tensor:
        return x.sum(-1)

    @rowsum.register_vmap
    def _(info, in_dims, x):
        return x.movedim(in_dims[0], 0).sum(-1), 0

    batch = ember.arange(24.0).reshape(2, 3, 4)
    ember.testing.assert_close(ember.func.vmap(rowsum)(batch), batch.sum(-1))
    assert library.get_kernel(rowsum, "cpu") is not None
    with pytest.raises(NotImplementedError, match="CUDA"):
        library.get_kernel(rowsum, "cuda")


def _numpy_sin_kernel(lib):
    def numpy_sin(x: lib.Tensor) -> lib.Tensor:
        return lib.from_numpy(np.sin(x.numpy()))

    return numpy_sin


def test_kernel_reads_numpy_of_inputs_that_require_grad_like_torch():
    # PyTorch's custom-op tutorial: the kernel calls x.numpy(); it runs below autograd.
    results = []
    for lib in (torch, ember):
        ns = _ns()

        numpy_sin = lib.library.custom_op(f"{ns}::numpy_sin", mutates_args=())(_numpy_sin_kernel(lib))

        numpy_sin.register_autograd(lambda ctx, g: g * ctx.x.cos(),
                                    setup_context=lambda ctx, inputs, output: setattr(ctx, "x", inputs[0]))
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = numpy_sin(x)
        y.sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-6, atol=1e-6)


def test_impl_with_a_library_object_as_decorator_like_torch():
    outs = []
    for lib in (torch, ember):
        ns = _ns()
        library_obj = lib.library.Library(ns, "DEF")
        library_obj.define("twice(Tensor x) -> Tensor")

        @lib.library.impl(library_obj, "twice", "CPU")
        def twice_cpu(x):
            return x * 2

        outs.append(getattr(lib.ops, ns).twice(lib.ones(2)).tolist())
    assert outs[0] == outs[1]


def test_custom_op_default_overload_like_torch():
    # torch.ops.<ns>.<op>.default calls the op and is the graph's target, as in PyTorch.
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    for lib, trace in ((torch, torch_make_fx), (ember, make_fx)):
        name = f"overload_probe_{lib.__name__}"

        @lib.library.custom_op(f"{name}::twice", mutates_args=())
        def twice(x: lib.Tensor) -> lib.Tensor:
            return x * 2

        @twice.register_fake
        def _(x, lib=lib):
            return lib.empty_like(x)

        packet = getattr(lib.ops, name).twice
        assert packet.default(lib.ones(2)).tolist() == [2.0, 2.0]
        gm = trace(lambda x: twice(x) + 1)(lib.ones(3))
        targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
        assert packet.default in targets


def test_impl_abstract_is_register_fake_with_a_future_warning_like_torch():
    import warnings

    import torch

    def program(lib, name):
        @lib.library.custom_op(f"s11lib::{name}", mutates_args=())
        def plus_one(x: lib.Tensor) -> lib.Tensor:
            return x + 1

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.library.impl_abstract(f"s11lib::{name}")(lambda x: lib.empty_like(x))
        kinds = sorted({type(w.message).__name__ for w in caught})
        lib._dynamo.reset()
        out = lib.compile(lambda x: plus_one(x) * 2, fullgraph=True, backend="eager")(lib.ones(2))
        return kinds, out.tolist()

    assert program(ember, "abstract_e") == program(torch, "abstract_t") == (["FutureWarning"], [4.0, 4.0])


@pytest.mark.parametrize("how", ["input", "view", "two_outputs"])
def test_custom_op_output_may_not_alias_as_torch(how):
    # PyTorch refuses a custom_op kernel result that is (a view of) an input or another output.
    def run(lib, ns):
        def body(x):
            if how == "input":
                return x
            if how == "view":
                return x.view(-1)
            y = x * 2
            return y, y

        if how == "two_outputs":
            def fn(x: lib.Tensor) -> tuple[lib.Tensor, lib.Tensor]:
                return body(x)
        else:
            def fn(x: lib.Tensor) -> lib.Tensor:
                return body(x)

        op = lib.library.custom_op(f"{ns}::alias_{how}", mutates_args=())(fn)
        with pytest.raises(RuntimeError) as err:
            op(lib.ones(2))
        return str(err.value).split("): ", 1)[1]

    assert run(ember, "embalias") == run(torch, "embalias")


def test_custom_op_fresh_outputs_and_mutation_pass_the_alias_check():
    @library.custom_op("embalias::fresh", mutates_args=["x"])
    def fresh(x: ember.Tensor, y: ember.Tensor) -> tuple[ember.Tensor, ember.Tensor]:
        x.add_(1)
        return y * 2, ember.empty(0)

    x = ember.ones(2)
    a, b = fresh(x, ember.ones(2))
    assert x.tolist() == [2.0, 2.0] and a.tolist() == [2.0, 2.0] and b.numel() == 0
