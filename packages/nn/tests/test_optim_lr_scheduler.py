"""Every learning-rate scheduler against PyTorch's: the same lr (and momentum) sequence."""

from __future__ import annotations

import copy
import math
import warnings

import pytest

import ember
import ember.optim

torch = pytest.importorskip("torch")


def _optimizer(lib, kind="sgd", lr_type=float):
    """Two parameter groups (lr 0.1 and 0.05); the parameters never get gradients."""
    params = [lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)]
    lrs = [0.1, 0.05] if lr_type is float else [lib.tensor(0.1, dtype=lib.float64), lib.tensor(0.05)]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(params, lrs)]
    if kind == "adam":
        return lib.optim.Adam(groups)
    return lib.optim.SGD(groups, momentum=0.9)


def _record(optimizer, scheduler):
    lrs = [float(lr) for lr in scheduler.get_last_lr()]
    group_lrs = [float(g["lr"]) for g in optimizer.param_groups]
    momenta = [g["betas"][0] if "betas" in g else g["momentum"] for g in optimizer.param_groups]
    return lrs, group_lrs, momenta


def _run(scheduler, optimizer, steps, step_args=None):
    history = [_record(optimizer, scheduler)]
    for i in range(steps):
        optimizer.step()
        if step_args is None:
            scheduler.step()
        else:
            scheduler.step(step_args[i])
        history.append(_record(optimizer, scheduler))
    return history


def _same_history(ours, theirs):
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        for x, y in zip(a, b):
            assert x == pytest.approx(y, rel=1e-13, abs=1e-16), f"step {i}: {a} != {b}"


S = "lr_scheduler"
SCHEDULES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T_0=5, T_mult=2, eta_min=0.01
    ),
    "CosineAnnealingWarmRestarts-T_mult1": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=36),
    "OneCycleLR-linear-3phase": lambda m, o: m.OneCycleLR(
        o, max_lr=0.3, total_steps=40, anneal_strategy="linear", three_phase=True, pct_start=0.25
    ),
    "OneCycleLR-no-momentum": lambda m, o: m.OneCycleLR(
        o, max_lr=0.3, epochs=6, steps_per_epoch=6, cycle_momentum=False, div_factor=10.0
    ),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 0.95**e),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (1 + e), lambda e: 0.9 ** (e // 3)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.97),
    "LinearLR-warmup": lambda m, o: m.LinearLR(o, start_factor=0.25, total_iters=8),
    "LinearLR-decay": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=20),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=6),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, gamma=0.9)], milestones=[5]
    ),
    "SequentialLR-three": lambda m, o: m.SequentialLR(
        o,
        [m.ConstantLR(o, factor=0.5, total_iters=3), m.CosineAnnealingLR(o, T_max=8), m.StepLR(o, 3, 0.5)],
        milestones=[4, 15],
    ),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.1, total_iters=4), m.ExponentialLR(o, gamma=0.9)]
    ),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(
        o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4, mode="triangular2"
    ),
    "CyclicLR-exp_range": lambda m, o: m.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=5, mode="exp_range", gamma=0.95
    ),
}


def _both(name, kind="sgd", lr_type=float):
    opt_ours, opt_theirs = _optimizer(ember, kind, lr_type), _optimizer(torch, kind, lr_type)
    sched_ours = SCHEDULES[name](ember.optim.lr_scheduler, opt_ours)
    sched_theirs = SCHEDULES[name](torch.optim.lr_scheduler, opt_theirs)
    return opt_ours, sched_ours, opt_theirs, sched_theirs


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_sequence(name):
    opt_ours, sched_ours, opt_theirs, sched_theirs = _both(name)
    _same_history(_run(sched_ours, opt_ours, 35), _run(sched_theirs, opt_theirs, 35))


@pytest.mark.parametrize("name", ["OneCycleLR-cos", "CyclicLR-triangular2", "StepLR"])
def test_adam_betas_and_tensor_lr(name):
    opt_ours, sched_ours, opt_theirs, sched_theirs = _both(name, kind="adam", lr_type=torch.Tensor)
    _same_history(_run(sched_ours, opt_ours, 30), _run(sched_theirs, opt_theirs, 30))
    assert isinstance(opt_ours.param_groups[0]["lr"], ember.Tensor)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_round_trip(name):
    opt_ours, sched_ours, opt_theirs, sched_theirs = _both(name)
    _run(sched_ours, opt_ours, 12)
    _run(sched_theirs, opt_theirs, 12)
    saved_sched = copy.deepcopy(sched_ours.state_dict())
    assert set(saved_sched) == set(sched_theirs.state_dict())
    saved_opt = copy.deepcopy(opt_ours.state_dict())
    # PyTorch's recipe: build the scheduler, then load the optimizer, then the scheduler.
    resumed_opt = _optimizer(ember)
    resumed = SCHEDULES[name](ember.optim.lr_scheduler, resumed_opt)
    resumed_opt.load_state_dict(saved_opt)
    resumed.load_state_dict(saved_sched)
    _same_history(_run(resumed, resumed_opt, 20), _run(sched_theirs, opt_theirs, 20))


CLOSED_FORM = [
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LinearLR-warmup",
    "ConstantLR",
    "PolynomialLR",
    "LambdaLR",
]


@pytest.mark.parametrize("name", CLOSED_FORM)
def test_step_with_epoch_uses_the_closed_form(name):
    epochs = [1, 2, 3, 7, 4, 12, 12, 20, 0, 25, 9]
    opt_ours, sched_ours, opt_theirs, sched_theirs = _both(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _run(sched_ours, opt_ours, len(epochs), epochs)
        theirs = _run(sched_theirs, opt_theirs, len(epochs), epochs)
    _same_history(ours, theirs)


def test_step_with_epoch_warns():
    opt, sched, _, _ = _both("StepLR")
    opt.step()
    with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        sched.step(3)


@pytest.mark.parametrize("T_mult", [1, 2])
def test_warm_restarts_fractional_epochs(T_mult):
    iters = 4
    epochs = [epoch + i / iters for epoch in range(12) for i in range(iters)]

    def make(m, o):
        return m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=T_mult, eta_min=0.001)

    opt_ours, opt_theirs = _optimizer(ember), _optimizer(torch)
    sched_ours, sched_theirs = (
        make(ember.optim.lr_scheduler, opt_ours),
        make(torch.optim.lr_scheduler, opt_theirs),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _run(sched_ours, opt_ours, len(epochs), epochs)
        theirs = _run(sched_theirs, opt_theirs, len(epochs), epochs)
    _same_history(ours, theirs)
    assert sched_ours.T_i == sched_theirs.T_i and sched_ours.last_epoch == sched_theirs.last_epoch


METRICS = [
    1.0,
    0.9,
    0.91,
    0.92,
    0.95,
    0.89,
    0.8899,
    0.8898,
    0.93,
    0.94,
    0.95,
    0.96,
    0.7,
    0.71,
    0.72,
    0.73,
    0.74,
    0.75,
    0.69,
    0.69,
    0.69,
    0.69,
    0.69,
    0.5,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
    0.6,
]
PLATEAU = [
    dict(),
    dict(patience=2),
    dict(patience=1, threshold=0.01, threshold_mode="abs", cooldown=2),
    dict(mode="max", patience=2, factor=0.5),
    dict(mode="max", patience=0, threshold_mode="abs", min_lr=[0.01, 0.02]),
    dict(patience=1, factor=0.5, min_lr=0.02, eps=1e-3),
]


@pytest.mark.parametrize("kwargs", PLATEAU, ids=[str(k) for k in PLATEAU])
def test_reduce_lr_on_plateau(kwargs):
    opt_ours, opt_theirs = _optimizer(ember), _optimizer(torch)
    sched_ours = ember.optim.lr_scheduler.ReduceLROnPlateau(opt_ours, **kwargs)
    sched_theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(opt_theirs, **kwargs)
    _same_history(_run(sched_ours, opt_ours, 20, METRICS), _run(sched_theirs, opt_theirs, 20, METRICS))
    saved = copy.deepcopy(sched_ours.state_dict())
    resumed_opt = _optimizer(ember)
    resumed_opt.load_state_dict(opt_ours.state_dict())
    resumed = ember.optim.lr_scheduler.ReduceLROnPlateau(resumed_opt)
    resumed.load_state_dict(saved)
    rest = METRICS[20:]
    _same_history(
        _run(resumed, resumed_opt, len(rest), rest), _run(sched_theirs, opt_theirs, len(rest), rest)
    )
    assert set(saved) == set(sched_theirs.state_dict())


def test_reduce_lr_on_plateau_accepts_a_tensor_metric_and_a_tensor_lr():
    opt = _optimizer(ember, lr_type=torch.Tensor)
    sched = ember.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    sched.step(ember.tensor(1.0))
    sched.step(ember.tensor(2.0))
    assert opt.param_groups[0]["lr"].item() == pytest.approx(0.01)
    assert sched.get_last_lr()[0].item() == pytest.approx(0.01)


def test_scheduler_errors():
    m = ember.optim.lr_scheduler
    opt = _optimizer(ember)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        m.StepLR(object(), step_size=2)
    with pytest.raises(KeyError, match="initial_lr"):
        m.StepLR(opt, step_size=2, last_epoch=3)
    with pytest.raises(ValueError, match="Constant multiplicative factor expected to be between 0 and 1."):
        m.ConstantLR(opt, factor=1.5)
    with pytest.raises(ValueError, match="Starting multiplicative factor expected to be greater than 0"):
        m.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        m.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="Expected integer T_mult >= 1, but got 1.5"):
        m.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=1.5)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        m.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(TypeError, match="lr_lambda should be a function, but got float"):
        m.MultiplicativeLR(opt, 0.5)
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        m.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode foo is unknown!"):
        m.ReduceLROnPlateau(opt, mode="foo")
    with pytest.raises(ValueError, match="threshold mode bar is unknown!"):
        m.ReduceLROnPlateau(opt, threshold_mode="bar")
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        m.ReduceLROnPlateau(opt, min_lr=[0.1])
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        m.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="Expected float between 0 and 1 pct_start"):
        m.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        m.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr must have the same length as optimizer.param_groups"):
        m.OneCycleLR(opt, max_lr=[0.1], total_steps=10)
    with pytest.raises(ValueError, match="Sequential Schedulers expects number of schedulers"):
        m.SequentialLR(opt, [m.StepLR(opt, 2)], milestones=[3])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        m.ChainedScheduler([m.ReduceLROnPlateau(opt)])
    plain = ember.optim.SGD([ember.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        m.OneCycleLR(ember.optim.Adagrad([ember.zeros(1, requires_grad=True)]), max_lr=0.1, total_steps=5)
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer"):
        m.SequentialLR(opt, [m.StepLR(opt, 2), m.StepLR(plain, 2)], milestones=[3])


def test_one_cycle_refuses_to_step_past_total_steps():
    opt = _optimizer(ember)
    sched = ember.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        opt.step()
        sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
        sched.step()


def test_warns_when_scheduler_steps_before_optimizer():
    opt = _optimizer(ember)
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=2)
    with pytest.warns(
        UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"
    ):
        sched.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()


def test_no_warning_in_the_normal_order():
    opt = _optimizer(ember)
    sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            opt.step()
            sched.step()
    assert math.isclose(sched.get_last_lr()[0], 0.05 + 0.05 * math.cos(math.pi * 3 / 5))


def test_resume_with_last_epoch():
    # Resuming from an epoch: CosineAnnealingLR's first step uses the closed form, as in PyTorch.
    histories = []
    for lib in (ember, torch):
        opt = _optimizer(lib)
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, last_epoch=4)
        histories.append(_run(sched, opt, 10))
    _same_history(*histories)
