"""``ember.utils.flop_counter.FlopCounterMode`` against ``torch.utils.flop_counter`` (and
tests/programs/flop_counting.py, a training step counted per module)."""

from __future__ import annotations

import pytest
import torch
import torch.utils.flop_counter as tfc

import ember
import ember.utils.flop_counter as efc


def _counts(fc):
    return {mod: sorted((str(op), n) for op, n in ops.items()) for mod, ops in fc.get_flop_counts().items()}


def _run(lib, fc_mod, body, **kw):
    with fc_mod.FlopCounterMode(display=False, **kw) as fc:
        body(lib)
    return fc.get_total_flops(), _counts(fc)


CASES = {
    "conv_transpose_backward": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(2, 3, 5, 5, requires_grad=True), m.ones(3, 4, 3, 3, requires_grad=True), stride=2).sum().backward(),
    "grouped_conv3d": lambda m: m.nn.functional.conv3d(m.ones(1, 4, 4, 4, 4), m.ones(6, 2, 2, 2, 2), groups=2),
    "linear_no_bias_backward": lambda m: m.nn.functional.linear(
        m.ones(3, 4, requires_grad=True), m.ones(5, 4, requires_grad=True)).sum().backward(),
    "bmm_baddbmm": lambda m: m.baddbmm(m.ones(2, 3, 4), m.ones(2, 3, 5), m.bmm(m.ones(2, 5, 6), m.ones(2, 6, 4))),
    "sdpa_cpu_uncounted": lambda m: m.nn.functional.scaled_dot_product_attention(
        m.ones(1, 2, 3, 4), m.ones(1, 2, 3, 4), m.ones(1, 2, 3, 4)),
    "nothing": lambda m: m.ones(3).sin(),
}


@pytest.mark.parametrize("case", list(CASES))
def test_counts_match_torch(case):
    assert _run(ember, efc, CASES[case]) == _run(torch, tfc, CASES[case])


def test_modules_are_named_as_torchs_tracker_names_them():
    def body(m):
        net = m.nn.Sequential(m.nn.Linear(4, 8), m.nn.ReLU(), m.nn.Sequential(m.nn.Linear(8, 2)))
        m.nn.functional.mse_loss(net(m.ones(3, 4)), m.zeros(3, 2)).backward()
        net[2](m.ones(1, 8))  # a child run on its own keeps the name its parent gave it

    assert _run(ember, efc, body) == _run(torch, tfc, body)


def test_custom_mapping_and_register_flop_formula():
    def body(m):
        m.ones(2, 3) @ m.ones(3, 4)

    mapping = {"e": {ember.ops.aten.mm: lambda a, b, out_shape=None: 7}, "t": {torch.ops.aten.mm: lambda a, b,
                                                                             out_shape=None: 7}}
    assert _run(ember, efc, body, custom_mapping=mapping["e"]) == _run(torch, tfc, body, custom_mapping=mapping["t"])
    assert _run(ember, efc, body)[0] == 48  # the mapping was the counter's own


def test_table_lists_modules_ops_and_percentages(capsys):
    net = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Linear(8, 2))
    with efc.FlopCounterMode(depth=1):
        net(ember.ones(3, 4))
        ember.ones(2, 2) @ ember.ones(2, 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["Module", "FLOP", "%", "Total"]
    assert lines[2].split() == ["Global", "304.000", "100.00%"]  # 192 + 96 + 16
    assert [line.split()[:2] for line in lines[3:]] == [["-", "aten.addmm"], ["-", "aten.mm"],
                                                       ["Sequential", "288.000"], ["-", "aten.addmm"]]


def test_mods_argument_warns_as_torch():
    with pytest.warns(UserWarning, match="mods argument is not needed anymore"):
        efc.FlopCounterMode(ember.nn.Linear(1, 1), display=False)
