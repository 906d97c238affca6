"""Optimizer plumbing against PyTorch: state_dict format and round trips, groups, errors, hooks."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from optim_helpers import assert_same_trajectory, pair, to_ember, torch, train

import ember
import ember.optim

ONE_CONFIG_EACH = [
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("Adadelta", dict()),
    ("Adamax", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01)),
    ("Rprop", dict(lr=0.01)),
    ("ASGD", dict(lr=0.05, t0=3)),
    ("Adafactor", dict(lr=0.01)),
]
IDS = [name for name, _ in ONE_CONFIG_EACH]


def _started(name, kwargs, steps=10):
    ours, theirs = pair()
    opt_ours = getattr(ember.optim, name)(ours.params, **kwargs)
    opt_theirs = getattr(torch.optim, name)(theirs.params, **kwargs)
    train(ours, opt_ours, steps)
    train(theirs, opt_theirs, steps)
    return ours, opt_ours, theirs, opt_theirs


def _fresh_copy(lib, source):
    """A new model in ``lib`` whose weights are ``source``'s current weights."""
    ours, theirs = pair()
    clone = ours if lib is ember else theirs
    with lib.no_grad():
        for p, a in zip(clone.params, source.arrays()):
            p.copy_(lib.tensor(a, dtype=p.dtype))
    return clone


def _resumed_pytorch(name, theirs, opt_theirs):
    """PyTorch's own run, resumed the same way (loading casts some state, e.g. ASGD's eta)."""
    model = _fresh_copy(torch, theirs)
    optimizer = getattr(torch.optim, name)(model.params)
    optimizer.load_state_dict(copy.deepcopy(opt_theirs.state_dict()))
    return model, optimizer


@pytest.mark.parametrize("name, kwargs", ONE_CONFIG_EACH, ids=IDS)
def test_state_dict_has_pytorchs_format(name, kwargs):
    _, opt_ours, _, opt_theirs = _started(name, kwargs, steps=3)
    ours, theirs = opt_ours.state_dict(), opt_theirs.state_dict()
    assert ours["param_groups"][0].keys() == theirs["param_groups"][0].keys()
    assert ours["param_groups"][0]["params"] == theirs["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert ours["state"].keys() == theirs["state"].keys()
    for index, entry in theirs["state"].items():
        assert ours["state"][index].keys() == entry.keys()
        for key, value in entry.items():
            mine = ours["state"][index][key]
            assert isinstance(mine, ember.Tensor)
            assert mine.dtype.name == str(value.dtype)[6:] and tuple(mine.shape) == tuple(value.shape)
            np.testing.assert_allclose(mine.numpy(), value.numpy(), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("name, kwargs", ONE_CONFIG_EACH, ids=IDS)
def test_state_dict_round_trip_continues_the_trajectory(name, kwargs):
    ours, opt_ours, theirs, opt_theirs = _started(name, kwargs)
    saved = copy.deepcopy(opt_ours.state_dict())
    resumed = _fresh_copy(ember, ours)
    opt_resumed = getattr(ember.optim, name)(resumed.params, lr=123.0)  # options come from the dict
    opt_resumed.load_state_dict(saved)
    assert opt_resumed.param_groups[0]["lr"] == kwargs.get("lr", opt_ours.defaults["lr"])
    theirs, opt_theirs = _resumed_pytorch(name, theirs, opt_theirs)
    assert_same_trajectory(train(resumed, opt_resumed, 10), train(theirs, opt_theirs, 10))


@pytest.mark.parametrize("name, kwargs", ONE_CONFIG_EACH, ids=IDS)
def test_load_a_pytorch_state_dict(name, kwargs):
    _, _, theirs, opt_theirs = _started(name, kwargs)
    resumed = _fresh_copy(ember, theirs)
    opt_resumed = getattr(ember.optim, name)(resumed.params)
    opt_resumed.load_state_dict(to_ember(copy.deepcopy(opt_theirs.state_dict())))
    assert resumed.params[0] in opt_resumed.state
    theirs, opt_theirs = _resumed_pytorch(name, theirs, opt_theirs)
    assert_same_trajectory(train(resumed, opt_resumed, 10), train(theirs, opt_theirs, 10))


def test_load_state_dict_casts_to_the_parameter_dtype_and_checks_sizes():
    ours, _ = pair()
    opt = ember.optim.Adam(ours.params)
    train(ours, opt, 2)
    sd = copy.deepcopy(opt.state_dict())
    for entry in sd["state"].values():
        entry["exp_avg"] = entry["exp_avg"].to(dtype=ember.float32)
    opt.load_state_dict(sd)
    assert opt.state[ours.params[0]]["exp_avg"].dtype == ember.float64
    assert opt.state[ours.params[0]]["step"].dtype == ember.float32
    bad = copy.deepcopy(sd)
    bad["param_groups"][0]["params"] = [0, 1, 2]
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(sd)
    bad["param_groups"].append(dict(bad["param_groups"][0]))
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(bad)


def test_state_dict_of_several_groups_numbers_parameters_in_order():
    ours, theirs = pair()
    opt_ours = ember.optim.SGD([{"params": ours.params[:1]}, {"params": ours.params[1:], "lr": 0.5}], lr=0.1)
    opt_theirs = torch.optim.SGD(
        [{"params": theirs.params[:1]}, {"params": theirs.params[1:], "lr": 0.5}], lr=0.1
    )
    assert opt_ours.state_dict()["param_groups"] == opt_theirs.state_dict()["param_groups"]


def test_named_parameters_are_kept_as_param_names():
    ours, _ = pair()
    opt = ember.optim.SGD([("w1", ours.params[0]), ("b1", ours.params[1])], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["w1", "b1"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w1", "b1"]
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": ours.params[2:]})


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    ours, _ = pair()
    opt = ember.optim.SGD(ours.params, lr=0.1)
    ours.loss().backward()
    grads = [p.grad for p in ours.params]
    opt.zero_grad(set_to_none=set_to_none)
    for p, g in zip(ours.params, grads):
        if set_to_none:
            assert p.grad is None
        else:
            assert p.grad is g and not g.numpy().any()


def test_zero_grad_default_is_set_to_none():
    ours, _ = pair()
    opt = ember.optim.Adam(ours.params)
    ours.loss().backward()
    opt.zero_grad()
    assert all(p.grad is None for p in ours.params)


def _invalid_cases():
    return [
        ("SGD", dict(lr=-1), "Invalid learning rate: -1"),
        ("SGD", dict(lr=0.1, momentum=-0.5), "Invalid momentum value: -0.5"),
        ("SGD", dict(lr=0.1, weight_decay=-1), "Invalid weight_decay value: -1"),
        ("SGD", dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
        ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum requires"),
        ("Adam", dict(lr=-0.01), "Invalid learning rate: -0.01"),
        ("Adam", dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
        ("Adam", dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
        ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
        ("Adam", dict(betas=(0, 0.99)), "betas must be either both floats or both Tensors"),
        ("AdamW", dict(weight_decay=-0.1), "Invalid weight_decay value: -0.1"),
        ("RMSprop", dict(alpha=-0.1), "Invalid alpha value: -0.1"),
        ("RMSprop", dict(momentum=-1.0), "Invalid momentum value: -1.0"),
        ("Adagrad", dict(lr_decay=-1.0), "Invalid lr_decay value: -1.0"),
        ("Adagrad", dict(initial_accumulator_value=-1.0), "Invalid initial_accumulator_value value: -1.0"),
        ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
        ("Adamax", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
        ("NAdam", dict(momentum_decay=-1.0), "Invalid momentum_decay value: -1.0"),
        ("RAdam", dict(eps=-1.0), "Invalid epsilon value: -1.0"),
        ("LBFGS", dict(lr=-1.0), "Invalid learning rate: -1.0"),
        ("Rprop", dict(etas=(1.0, 1.2)), "Invalid eta values: 1.0, 1.2"),
        ("ASGD", dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        ("Adafactor", dict(lr=-1.0), "Learning rate should be >= 0 but is: -1.0"),
        ("Adafactor", dict(beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
        ("Adafactor", dict(d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
    ]


@pytest.mark.parametrize("name, kwargs, message", _invalid_cases())
def test_invalid_hyperparameters(name, kwargs, message):
    ours, theirs = pair()
    with pytest.raises(ValueError) as theirs_error:
        getattr(torch.optim, name)(theirs.params, **kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as ours_error:
        getattr(ember.optim, name)(ours.params, **kwargs)
    assert str(ours_error.value) == str(theirs_error.value)


def test_tensor_lr_must_have_one_element():
    ours, _ = pair()
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        ember.optim.SGD(ours.params, lr=ember.tensor([0.1, 0.2]))


def test_parameter_in_two_groups_raises_and_duplicates_in_one_group_warn():
    ours, _ = pair()
    w = ours.params[0]
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        ember.optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    opt = ember.optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [w]})
    with pytest.warns(UserWarning, match="duplicate parameters"):
        ember.optim.SGD([w, w], lr=0.1)


def test_bad_params_arguments():
    ours, _ = pair()
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        ember.optim.SGD([ours.params[0] * 2], lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        ember.optim.Adam([])
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts"):
        ember.optim.Adam(ours.params[0])
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        ember.optim.Adam([1.0])
    with pytest.raises(TypeError, match="ordered collections"):
        ember.optim.Adam([{"params": {ours.params[0]}}])
    with pytest.raises(TypeError, match="param_group must be a dict"):
        ember.optim.Adam(ours.params).add_param_group(ours.params[0])
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        ember.optim.LBFGS([{"params": ours.params[:1]}, {"params": ours.params[1:]}])


def test_required_option_must_be_given_by_each_group():
    ours, _ = pair()

    class Plain(ember.optim.Optimizer):
        def __init__(self, params, lr=ember.optim.optimizer.required):
            super().__init__(params, {"lr": lr})

    with pytest.raises(ValueError, match="didn't specify a value of required optimization parameter lr"):
        Plain(ours.params)
    assert Plain(ours.params, lr=0.1).param_groups[0]["lr"] == 0.1


def test_add_param_group_fills_defaults():
    ours, _ = pair()
    opt = ember.optim.Adam(ours.params[:2], lr=0.01, weight_decay=0.1)
    opt.add_param_group({"params": ours.params[2:], "lr": 0.5})
    group = opt.param_groups[1]
    assert group["lr"] == 0.5 and group["weight_decay"] == 0.1 and group["betas"] == (0.9, 0.999)


def test_step_hooks_run_in_order_and_can_be_removed():
    ours, _ = pair()
    opt = ember.optim.SGD(ours.params, lr=0.1)
    calls = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", o is opt)))
    post = opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", o is opt)))
    glob = ember.optim.optimizer.register_optimizer_step_pre_hook(
        lambda o, a, k: calls.append(("global", True))
    )
    ours.loss().backward()
    opt.step()
    assert calls == [("global", True), ("pre", True), ("post", True)]
    for handle in (pre, post, glob):
        handle.remove()
    opt.step()
    assert len(calls) == 3


def test_pre_hook_may_replace_the_arguments():
    ours, _ = pair()
    opt = ember.optim.SGD(ours.params, lr=0.1)
    closure = ours.closure(opt)
    opt.register_step_pre_hook(lambda o, args, kwargs: ((), {"closure": closure}))
    assert opt.step() is not None  # the hook supplied a closure, whose loss is returned


def test_state_dict_hooks():
    ours, _ = pair()
    opt = ember.optim.SGD(ours.params, lr=0.1, momentum=0.9)
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    loaded = []
    opt.register_load_state_dict_post_hook(lambda o: loaded.append(True))
    sd = opt.state_dict()
    assert sd["extra"] == 1
    opt.load_state_dict(sd)
    assert loaded == [True]


def test_repr_matches_pytorch():
    ours, theirs = pair()
    text = repr(ember.optim.Adam(ours.params, lr=0.01))
    assert text == repr(torch.optim.Adam(theirs.params, lr=0.01))


def test_unsupported_differentiable_mode_is_an_error():
    ours, _ = pair()
    with pytest.raises(NotImplementedError, match="differentiable"):
        ember.optim.Adam(ours.params, differentiable=True)


def test_no_warnings_in_a_normal_step():
    ours, _ = pair()
    opt = ember.optim.NAdam(ours.params)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train(ours, opt, 2)


def test_pickle_round_trip_keeps_state_and_groups():
    import pickle

    ours, _ = pair()
    opt = ember.optim.Adam(ours.params, lr=0.01)
    train(ours, opt, 2)
    clone = pickle.loads(pickle.dumps(opt))
    assert clone.param_groups[0]["lr"] == 0.01 and len(clone.state) == 4
    assert clone.register_step_pre_hook(lambda *a: None) is not None  # hooks restored empty


@pytest.mark.parametrize("name", ["Adam", "SGD"])
def test_training_under_one_cycle_matches_pytorch(name):
    # The scheduler rewrites lr and betas[0] (or momentum) every step; the optimizer must read them.
    ours, theirs = pair()
    trajectories = []
    for lib, model in ((ember, ours), (torch, theirs)):
        kwargs = dict(lr=0.01, momentum=0.9) if name == "SGD" else dict(lr=0.01)
        opt = getattr(lib.optim, name)(model.params, **kwargs)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=20)
        snapshots = []
        for _ in range(20):
            opt.zero_grad()
            model.loss().backward()
            opt.step()
            sched.step()
            snapshots.append(model.arrays())
        trajectories.append(snapshots[4::5])
    assert_same_trajectory(*trajectories)
