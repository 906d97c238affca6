"""Behaviour differences found by the session-19 user programs (tests/programs/s19_*.py), each against torch,
and the optimizers' cached complex-parameter check (rescanned when a parameter's dtype or a group changes)."""

from __future__ import annotations

import pytest
import torch

import ember


def _outcome(lib, fn):
    try:
        out = fn(lib)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return ("raises", type(e).__name__, str(e).replace("ember.", "torch."))
    return ("value", [complex(v) for v in out.detach().flatten().tolist()])


def _same(fn):
    theirs, ours = _outcome(torch, fn), _outcome(ember, fn)
    if theirs[0] == ours[0] == "value":
        assert ember.allclose(ember.tensor(ours[1]), ember.tensor(theirs[1]), rtol=1e-5, atol=1e-6), (ours, theirs)
    else:
        assert theirs == ours


def _values(lib):
    return lib.tensor([0.5, -1.0, 2.0])


def _made_complex_after_steps(how):
    def run(lib):
        model = lib.nn.Linear(3, 1, bias=False)
        with lib.no_grad():
            model.weight.copy_(_values(lib).view(1, 3))
        opt = lib.optim.Adam(model.parameters(), lr=0.1)
        x = _values(lib).view(1, 3)
        for step in range(4):
            if step == 2:  # after two real steps (the check was cached as "no complex parameter")
                if how == "data":
                    model.weight.data = model.weight.data.to(lib.complex64) * (1 + 1j)
                    opt.state.clear()
                else:
                    model.to(lib.complex64)
                    opt.state.clear()
                x = x.to(lib.complex64)
            opt.zero_grad()
            out = model(x)
            (out.real ** 2 + out.imag ** 2).sum().backward() if out.is_complex() else (out ** 2).sum().backward()
            opt.step()
        return model.weight
    return run


@pytest.mark.parametrize("how", ["data", "module_to"])
def test_optimizer_sees_a_parameter_made_complex_after_it_cached_the_check(how):
    _same(_made_complex_after_steps(how))


def test_optimizer_sees_a_complex_group_added_later():
    def run(lib):
        real = lib.nn.Parameter(_values(lib))
        opt = lib.optim.RMSprop([real], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            (real ** 2).sum().backward()
            opt.step()
        z = lib.nn.Parameter(_values(lib).to(lib.complex64) * (1 - 2j))
        opt.add_param_group({"params": [z]})
        for _ in range(2):
            opt.zero_grad()
            ((real ** 2).sum() + (z * z.conj()).real.sum()).backward()
            opt.step()
        return lib.cat([real.to(lib.complex64), z])
    _same(run)


def test_complex_check_is_not_rescanned_while_nothing_changes(monkeypatch):
    import ember.optim.optimizer as optimizer_module

    params = [ember.nn.Parameter(ember.ones(2)) for _ in range(3)]
    for p in params:
        p.grad = ember.ones(2)
    opt = ember.optim.SGD(params, lr=0.1)
    opt.step()
    scans = []
    is_complex = optimizer_module._IS_COMPLEX
    monkeypatch.setattr(optimizer_module, "_IS_COMPLEX", lambda d: scans.append(d) or is_complex(d))
    opt.step()
    opt.step()
    assert scans == []
    opt.add_param_group({"params": [ember.nn.Parameter(ember.ones(1))]})
    opt.param_groups[-1]["params"][0].grad = ember.ones(1)
    opt.step()
    assert len(scans) == 4  # the three first parameters and the new one
    scans.clear()
    params[0].data = params[0].data.double()  # a dtype change anywhere: rescan
    opt.step()
    assert len(scans) == 4


@pytest.mark.parametrize("kwargs", [{"weight_decay": 0.1}, {"weight_decay": 0.1, "maximize": True},
                                    {"weight_decay": 0.1, "momentum": 0.9}, {"momentum": 0.9}, {}])
def test_sgd_on_sparse_gradients_with_weight_decay_raises_as_torch(kwargs):
    # ember decayed densely without weight_decay's error, and crashed (AttributeError) under maximize
    def run(lib):
        emb = lib.nn.Embedding(4, 2, sparse=True)
        with lib.no_grad():
            emb.weight.copy_(lib.arange(8.0).view(4, 2))
        opt = lib.optim.SGD(emb.parameters(), lr=0.1, **kwargs)
        for _ in range(2):
            opt.zero_grad()
            emb(lib.tensor([1, 3, 1])).sum().backward()
            opt.step()
        return emb.weight
    _same(run)


@pytest.mark.parametrize("dtype", ["int64", "float64", "float16"])
def test_embedding_bag_per_sample_weights_dtype_must_match_weight(dtype):
    def run(lib):
        bag = lib.nn.EmbeddingBag(5, 2, mode="sum")
        return bag(lib.tensor([1, 2]), lib.tensor([0]), per_sample_weights=lib.ones(2, dtype=getattr(lib, dtype)))
    _same(run)


@pytest.mark.parametrize("seqs", [[(), ()], [(2,), ()], [(2, 3), (1, 3)]])
def test_pad_sequence_of_0d_sequences_raises_torchs_type(seqs):
    def run(lib):
        return lib.nn.utils.rnn.pad_sequence([lib.ones(s) for s in seqs])
    theirs, ours = _outcome(torch, run), _outcome(ember, run)
    assert theirs[:2] == ours[:2]
