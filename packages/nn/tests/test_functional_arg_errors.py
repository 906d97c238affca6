"""nn.functional called with a non-tensor argument raises PyTorch's argument-parser TypeError
(type and message), from the dispatcher's ops and from the Python composites alike."""

import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as EF

CALLS = [
    ("linear", lambda F, t: F.linear([1.0], t)),
    ("linear_weight", lambda F, t: F.linear(t, [1.0])),
    ("cross_entropy", lambda F, t: F.cross_entropy([1.0], t)),
    ("cross_entropy_target", lambda F, t: F.cross_entropy(t, [1])),
    ("nll_loss", lambda F, t: F.nll_loss([1.0], t)),
    ("kl_div", lambda F, t: F.kl_div([1.0], t, reduction="batchmean")),
    ("max_pool2d", lambda F, t: F.max_pool2d([1.0], 2)),
    ("max_pool1d", lambda F, t: F.max_pool1d([1.0], 2)),
    ("avg_pool1d", lambda F, t: F.avg_pool1d([1.0], 2)),
    ("avg_pool2d", lambda F, t: F.avg_pool2d([1.0], 2)),
    ("cosine_similarity", lambda F, t: F.cosine_similarity(t, [1.0])),
    ("pairwise_distance", lambda F, t: F.pairwise_distance([1.0], t)),
    ("dropout", lambda F, t: F.dropout([1.0])),
    ("pad", lambda F, t: F.pad([1.0], (1, 1))),
    ("relu", lambda F, t: F.relu([1.0])),
    ("silu", lambda F, t: F.silu([1.0])),
    ("hardswish", lambda F, t: F.hardswish([1.0])),
    ("layer_norm", lambda F, t: F.layer_norm([1.0], (1,))),
    ("batch_norm", lambda F, t: F.batch_norm([1.0], None, None)),
    ("embedding", lambda F, t: F.embedding([1], t)),
    ("exp", lambda F, t: F.elu([1.0])),
]


@pytest.mark.parametrize("call", [c for _, c in CALLS], ids=[n for n, _ in CALLS])
def test_non_tensor_argument_is_torchs_type_error(call):
    messages = []
    for F, lib in ((EF, ember), (TF, torch)):
        with pytest.raises(TypeError) as info:
            call(F, lib.ones(2, 2))
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("call", [
    lambda F, L: F.linear(L.tensor(1.0), L.ones(2, 2)),
    lambda F, L: F.linear(L.ones(2), L.tensor(1.0)),
    lambda F, L: F.linear(L.tensor(1.0), L.ones(2, 2), L.ones(2)),
    lambda F, L: F.relu(L.ones(2, dtype=L.bool)),
    lambda F, L: F.relu6(L.ones(2, dtype=L.bool)),
    lambda F, L: F.hardtanh(L.ones(2, dtype=L.bool)),
    lambda F, L: F.gelu(L.ones(2), approximate="x"),
])
def test_runtime_errors_are_torchs(call):
    """0-d linear operands, bool activations and a bad gelu approximation: PyTorch's messages."""
    with pytest.raises(RuntimeError) as expected:
        call(TF, torch)
    with pytest.raises(RuntimeError) as got:
        call(EF, ember)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("call", [
    lambda F: F.avg_pool2d(ember_or_torch(F).ones(1, 5), 2),
    lambda F: F.avg_pool2d(ember_or_torch(F).ones(5), 2),
    lambda F: F.avg_pool1d(ember_or_torch(F).ones(5), 2),
    lambda F: F.avg_pool1d(ember_or_torch(F).ones(1, 1, 1, 5), 2),
    lambda F: F.max_pool2d(ember_or_torch(F).ones(1, 5), 2),
])
def test_pool_rank_errors(call):
    """avg_pool2d of fewer than 3 dims is PyTorch's IndexError (it reads size(-3) first); avg_pool1d
    checks the rank with its own wording."""
    outcomes = []
    for F in (TF, EF):
        try:
            call(F)
        except Exception as exc:  # noqa: BLE001 - the exception is what is compared
            outcomes.append((type(exc).__name__, str(exc)))
    assert len(outcomes) == 2 and outcomes[0] == outcomes[1]


def ember_or_torch(F):
    return torch if F is TF else ember


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.logsigmoid(lib.tensor([1, 2])),  # ember named softplus's kernel
    lambda lib: lib.nn.Parameter(lib.ones(2, dtype=lib.long)),  # ember's text was requires_grad_'s
    lambda lib: lib.cdist(lib.ones(2, 3), lib.ones(2, 3), p=-1),  # ember added ", got -1"
], ids=["logsigmoid int", "Parameter int", "cdist negative p"])
def test_wrong_dtype_and_argument_texts_as_pytorch(call):
    raised = []
    for lib in (torch, ember):
        with pytest.raises(Exception) as info:
            call(lib)
        raised.append((info.type.__name__, str(info.value)))
    assert raised[1] == raised[0]
