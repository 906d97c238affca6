"""Behaviour differences found by the session-18 user programs (tests/programs/s18_*.py), each against torch."""

from __future__ import annotations

import pytest
import torch

import ember


def _outcome(lib, fn):
    try:
        out = fn(lib)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        # dtype and Size reprs name ember (docs/deviations.md)
        return ("raises", type(e).__name__, str(e).replace("ember.", "torch."))
    return ("value", tuple(out.shape), str(out.dtype).replace("ember.", "torch."), out.detach().flatten().tolist(),
            type(out.grad_fn).__name__ if out.grad_fn is not None else None)


def _same(fn):
    theirs, ours = _outcome(torch, fn), _outcome(ember, fn)
    if theirs[0] == "value" and ours[0] == "value":
        assert theirs[:3] == ours[:3] and theirs[4] == ours[4], (theirs, ours)
        assert ember.allclose(ember.tensor(ours[3]), ember.tensor(theirs[3]), equal_nan=True)
    else:
        assert theirs == ours


ADAPTIVE_AVG_CASES = {
    # a global average pool of a feature map that shrank to nothing: PyTorch takes a mean (NaN), no error
    "2d empty plane": lambda m: m.nn.AdaptiveAvgPool2d(1)(m.ones(2, 4, 0, 0, requires_grad=True)),
    "2d empty height": lambda m: m.nn.functional.adaptive_avg_pool2d(m.ones(1, 2, 0, 3), (1, 1)),
    "1d empty": lambda m: m.nn.functional.adaptive_avg_pool1d(m.ones(1, 2, 0, requires_grad=True), 1),
    "3d empty": lambda m: m.nn.functional.adaptive_avg_pool3d(m.ones(1, 2, 0, 3, 3, requires_grad=True), 1),
    "2d 1x1 grad_fn": lambda m: m.nn.functional.adaptive_avg_pool2d(m.ones(1, 2, 4, 3, requires_grad=True), 1),
    "3d 1x1 grad_fn": lambda m: m.nn.functional.adaptive_avg_pool3d(m.ones(1, 2, 2, 3, 3, requires_grad=True), 1),
    "2d 1x1 on 2d input": lambda m: m.nn.functional.adaptive_avg_pool2d(m.arange(6.0).view(2, 3), 1),
    "2d 1x1 on 5d input": lambda m: m.nn.functional.adaptive_avg_pool2d(m.arange(24.0).view(1, 2, 2, 3, 2), 1),
    "3d 1x1 on 3d input": lambda m: m.nn.functional.adaptive_avg_pool3d(m.arange(18.0).view(2, 3, 3), 1),
    "2d 1x1 long": lambda m: m.nn.functional.adaptive_avg_pool2d(m.ones(1, 2, 3, 3, dtype=m.long), 1),
    "2d 2x2 long": lambda m: m.nn.functional.adaptive_avg_pool2d(m.ones(1, 2, 3, 3, dtype=m.long), 2),
    "2d 2x2 empty plane": lambda m: m.nn.functional.adaptive_avg_pool2d(m.ones(1, 2, 0, 3), 2),
    "2d negative": lambda m: m.nn.functional.adaptive_avg_pool2d(m.ones(1, 2, 3, 3), (2, -1)),
    "1d negative": lambda m: m.nn.functional.adaptive_avg_pool1d(m.ones(1, 2, 3), -1),
    "3d negative": lambda m: m.nn.functional.adaptive_avg_pool3d(m.ones(1, 2, 2, 3, 3), -1),
    "max 2d negative": lambda m: m.nn.functional.adaptive_max_pool2d(m.ones(1, 2, 3, 3), (2, -1)),
    "max 1d negative": lambda m: m.nn.functional.adaptive_max_pool1d(m.ones(2, 3, 3), -1),
    "avg 1d on 1d": lambda m: m.nn.functional.adaptive_avg_pool1d(m.ones(3), 2),
    "max 1d on 4d": lambda m: m.nn.functional.adaptive_max_pool1d(m.ones(1, 2, 3, 4), 2),
}


@pytest.mark.parametrize("name", sorted(ADAPTIVE_AVG_CASES))
def test_adaptive_avg_pool_one_is_a_mean_as_in_torch(name):
    _same(ADAPTIVE_AVG_CASES[name])


def test_adaptive_avg_pool_one_gradient_and_channels_last():
    values = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(0))
    tx = values.clone().requires_grad_()
    ex = ember.tensor(values.numpy()).requires_grad_()
    torch.nn.functional.adaptive_avg_pool2d(tx, 1).pow(2).sum().backward()
    ember.nn.functional.adaptive_avg_pool2d(ex, 1).pow(2).sum().backward()
    assert ember.allclose(ex.grad, ember.tensor(tx.grad.numpy()), atol=1e-6)
    tcl = torch.nn.functional.adaptive_avg_pool2d(values.to(memory_format=torch.channels_last), 1)
    ecl = ember.nn.functional.adaptive_avg_pool2d(ember.tensor(values.numpy()).to(memory_format=ember.channels_last), 1)
    assert ecl.stride() == tcl.stride()


BCE_CASES = {
    "target above 1": ([0.5, 0.5], [0.0, 2.0]),
    "target below 0": ([0.5, 0.5], [-0.1, 1.0]),
    "target nan": ([0.5, 0.5], [float("nan"), 1.0]),
    "input bad first": ([1.5, 0.5], [0.0, 2.0]),
    "target bad first": ([0.5, 1.5], [2.0, 0.0]),
    "both bad in one element": ([1.5], [2.0]),
    "valid": ([0.2, 0.7], [0.0, 1.0]),
}


@pytest.mark.parametrize("name", sorted(BCE_CASES))
def test_binary_cross_entropy_checks_target_range_as_torch(name):
    # ember checked the input only: a target of 2 gave a (negative) loss where PyTorch's CPU kernel raises
    x, t = BCE_CASES[name]
    _same(lambda m: m.nn.functional.binary_cross_entropy(m.tensor(x), m.tensor(t), reduction="none"))


@pytest.mark.parametrize("wshape", [(2,), (4, 3), (2, 2, 3), (3,), (2, 1), (1,)])
def test_binary_cross_entropy_weight_broadcast_as_torch(wshape):
    _same(lambda m: m.nn.functional.binary_cross_entropy(m.full((2, 3), 0.25), m.zeros(2, 3),
                                                         weight=m.ones(wshape) * 2, reduction="none"))


def _ctc(m, targets, input_lengths, target_lengths):
    log_probs = m.arange(40.0).reshape(5, 2, 4).div(7).sin().log_softmax(2)
    return m.nn.functional.ctc_loss(log_probs, m.tensor(targets), m.tensor(input_lengths), m.tensor(target_lengths),
                                    reduction="none")


CTC_CASES = {
    "input length too long": ([[1, 2], [1, 1]], [6, 5], [2, 2]),
    "input length negative": ([[1, 2], [1, 1]], [-1, 5], [2, 2]),
    "target length negative": ([[1, 2], [1, 1]], [5, 5], [2, -1]),
    "padded targets too short": ([[1, 2], [1, 1]], [5, 5], [3, 2]),
    # a 2-D targets of the wrong batch was read as concatenated targets (a loss where PyTorch raises)
    "padded targets wrong batch": ([[1, 2, 3, 1]], [5, 5], [2, 2]),
    "concatenated targets too few": ([1, 2, 3], [5, 5], [2, 2]),
    "concatenated targets too many": ([1, 2, 3, 1, 2], [5, 5], [2, 2]),
    "concatenated exact": ([1, 2, 3, 1], [5, 4], [2, 2]),
    "padded valid": ([[1, 2, 0], [3, 3, 1]], [5, 5], [2, 3]),
}


@pytest.mark.parametrize("name", sorted(CTC_CASES))
def test_ctc_loss_checks_as_torch(name):
    _same(lambda m: _ctc(m, *CTC_CASES[name]))


@pytest.mark.parametrize("shapes", [((5, 2), (5, 2)), ((5, 3), (5, 3)), ((5, 3), (5, 2)), ((5, 2), (5, 3))])
def test_bilinear_size_errors_name_the_input_as_torch(shapes):
    a, b = shapes
    _same(lambda m: m.nn.functional.bilinear(m.ones(a), m.ones(b), m.ones(4, 2, 3), m.zeros(4)))


def _complex_run(lib, name, kwargs, steps=3):
    p = lib.nn.Parameter(lib.tensor([1 + 1j, 2 - 1j, -0.5 + 0.25j]))
    opt = getattr(lib.optim, name)([p], **kwargs)

    def closure():
        opt.zero_grad()
        loss = (p.abs() ** 2 + p.real * 0.5 - p.imag).sum()
        loss.backward()
        return loss

    for _ in range(steps):
        opt.step(closure)
    state = opt.state_dict()["state"].get(0, {})
    # the state kept per element (complex as the parameter); LBFGS's H_diag is a float in ember
    kinds = {k: str(v.dtype).split(".")[-1] for k, v in state.items()
             if isinstance(v, (torch.Tensor, ember.Tensor)) and v.dim() > 0}
    return [(z.real, z.imag) for z in p.detach().tolist()], kinds


COMPLEX_OPTIMIZERS = [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 0.1, "amsgrad": True}),
    ("Adam", {"lr": 0.1, "foreach": True, "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.1, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}),
    ("Adagrad", {"lr": 0.1}),
    ("Adadelta", {"lr": 1.0}),
    ("Adamax", {"lr": 0.1}),
    ("NAdam", {"lr": 0.1}),
    ("RAdam", {"lr": 0.1}),
    ("ASGD", {"lr": 0.1}),
    ("Rprop", {"lr": 0.1}),
    ("LBFGS", {"lr": 0.5, "max_iter": 4}),
]


@pytest.mark.parametrize("name,kwargs", COMPLEX_OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in
                                                                  enumerate(COMPLEX_OPTIMIZERS)])
def test_optimizers_update_complex_parameters_as_their_real_views(name, kwargs):
    # Adam & co. raised (no complex lerp) and RMSprop/Adagrad/Adadelta computed |g|^2 wrongly (g*g, not
    # per real component) where PyTorch steps view_as_real(param) and keeps complex state.
    theirs, their_kinds = _complex_run(torch, name, kwargs)
    ours, our_kinds = _complex_run(ember, name, kwargs)
    assert our_kinds == their_kinds
    assert ember.allclose(ember.tensor(ours), ember.tensor(theirs), rtol=1e-5, atol=1e-6), (ours, theirs)


def test_adafactor_refuses_complex_parameters_as_torch():
    for lib in (torch, ember):
        p = lib.nn.Parameter(lib.tensor([1 + 1j]))
        p.grad = lib.tensor([1 + 0j])
        with pytest.raises(RuntimeError, match="Adafactor does not support complex parameters"):
            lib.optim.Adafactor([p]).step()


@pytest.mark.parametrize("shape,nshape", [((2, 3), (2,)), ((2, 3), (3, 2)), ((2, 3, 4), (2, 3))])
def test_rms_norm_shape_error_text_as_torch(shape, nshape):
    _same(lambda m: m.nn.functional.rms_norm(m.ones(shape), nshape))


@pytest.mark.parametrize("kdim,vdim", [(4, 5), (3, 4), (3, 5)])
def test_mha_separate_projection_shape_asserts_as_torch(kdim, vdim):
    # ember reached a matmul with the wrong key width (RuntimeError) where PyTorch asserts the weight's shape
    def run(m):
        m.manual_seed(0)
        mha = m.nn.MultiheadAttention(8, 2, kdim=3, vdim=5, batch_first=True)
        return mha(m.zeros(2, 4, 8), m.zeros(2, 6, kdim), m.zeros(2, 6, vdim))[0]

    _same(run)


def test_saved_layouts_load_weights_only_in_both_libraries():
    # ember pickled a layout through a private ember global, which weights_only loads (its own and
    # PyTorch's) refused; torch.save writes torch.serialization._get_layout('torch.strided')
    import io

    buf = io.BytesIO()
    ember.save({"layout": ember.strided, "sparse": ember.sparse_coo, "t": ember.ones(2)}, buf)
    buf.seek(0)
    theirs = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert theirs["layout"] is torch.strided and theirs["sparse"] is torch.sparse_coo
    ours = ember.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert ours["layout"] is ember.strided and ours["sparse"] is ember.sparse_coo
