"""ember.export.cond (torch.cond): eager picks a branch; exported programs select with where."""

from __future__ import annotations

import io

import pytest
import torch

import ember
from ember.export import Dim, UserError, cond, export, load, save


class _Branchy(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(3, 3)

    def forward(self, x):
        return cond(x.sum() > 0, lambda v: self.fc(v).relu(), lambda v: v * -2.0, (x,))


def test_eager_cond_runs_one_branch_like_torch_cond():
    calls = []

    def yes(x):
        calls.append("yes")
        return x + 1

    def no(x):
        calls.append("no")
        return x - 1

    ember.testing.assert_close(cond(ember.tensor(True), yes, no, (ember.zeros(2),)), ember.ones(2))
    ember.testing.assert_close(cond(False, yes, no, [ember.zeros(2)]), -ember.ones(2))
    assert calls == ["yes", "no"]
    t = torch.cond(torch.tensor(True), lambda x: x + 1, lambda x: x - 1, (torch.zeros(2),))
    assert t.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="single-element"):
        cond(ember.tensor([True, False]), yes, no, (ember.zeros(2),))


def test_exported_cond_matches_eager_for_both_branches_and_round_trips():
    model = _Branchy()
    ep = export(model, (ember.randn(2, 3),), dynamic_shapes=({0: Dim("b")},))
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    loaded = load(buf).module()
    for x in (ember.ones(4, 3), -ember.ones(5, 3), ember.randn(2, 3)):
        ember.testing.assert_close(ep.module()(x), model(x))
        ember.testing.assert_close(loaded(x), model(x))


def test_cond_branches_must_agree():
    class Mismatch(ember.nn.Module):
        def forward(self, x):
            return cond(x.sum() > 0, lambda v: v, lambda v: v.sum(), (x,))

    with pytest.raises(UserError, match="same shapes and dtypes"):
        export(Mismatch(), (ember.randn(2, 3),))


def test_cond_in_onnx():
    onnx = pytest.importorskip("onnx")  # noqa: F841 - the import is the check
    import ember.onnx

    model = _Branchy()
    program = ember.onnx.export(model, (ember.randn(2, 3),), dynamic_shapes=({0: Dim("b")},))
    for x in (ember.ones(4, 3), -ember.ones(3, 3)):
        ember.testing.assert_close(program(x)[0], model(x).detach(), rtol=1e-5, atol=1e-6)
