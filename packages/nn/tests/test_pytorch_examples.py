"""Divergences found by running pytorch/examples programs (word_language_model, mnist, vae, ...)
under ``import ember as torch``, each checked against PyTorch 2.13."""

from __future__ import annotations

import io

import pytest
import torch

import ember


class _EmberRNNModel(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = ember.nn.Embedding(7, 4)
        self.rnn = ember.nn.LSTM(4, 5, 2)
        self.decoder = ember.nn.Linear(5, 7)


class _TorchRNNModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Embedding(7, 4)
        self.rnn = torch.nn.LSTM(4, 5, 2)
        self.decoder = torch.nn.Linear(5, 7)


@pytest.mark.parametrize("lib,cls", [(torch, _TorchRNNModel), (ember, _EmberRNNModel)])
def test_whole_module_checkpoint_loads_with_safe_globals(lib, cls):
    # word_language_model: torch.save(model, f), then torch.load(f) under safe_globals([...]).
    # nn.Module defines __setstate__; the weights-only unpickler must call it (it raised
    # AttributeError on object.__setstate__, which Python < 3.13 lacks).
    model = cls()
    buf = io.BytesIO()
    lib.save(model, buf)
    buf.seek(0)
    allowed = [cls, lib.nn.modules.sparse.Embedding, lib.nn.modules.rnn.LSTM, lib.nn.modules.linear.Linear]
    with lib.serialization.safe_globals(allowed):
        back = lib.load(buf)
    assert type(back) is cls and type(back.rnn) is lib.nn.LSTM
    x = lib.tensor([[1, 2], [3, 4], [5, 6]])
    out, _ = back.rnn(back.encoder(x))
    ref, _ = model.rnn(model.encoder(x))
    assert lib.equal(out, ref)


def test_non_dynamically_quantizable_linear_lives_in_nn_modules_linear():
    # word_language_model lists torch.nn.modules.linear.NonDynamicallyQuantizableLinear in safe_globals
    for lib in (torch, ember):
        cls = lib.nn.modules.linear.NonDynamicallyQuantizableLinear
        assert issubclass(cls, lib.nn.Linear)
        assert type(lib.nn.MultiheadAttention(4, 2).out_proj) is cls
    assert ember.nn.modules.activation.MultiheadAttention is ember.nn.MultiheadAttention


@pytest.mark.parametrize("lib", [torch, ember])
def test_allowed_function_kept_as_module_attribute_loads_as_that_function(lib):
    # word_language_model's TransformerModel: TransformerEncoderLayer.activation = F.relu, loaded
    # with F.relu in safe_globals; ember returned its internal call wrapper instead of F.relu
    layer = lib.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0)
    buf = io.BytesIO()
    lib.save({"act": lib.nn.functional.relu, "layer": layer}, buf)
    buf.seek(0)
    m = lib.nn.modules
    allowed = [lib.nn.functional.relu, m.transformer.TransformerEncoderLayer, m.activation.MultiheadAttention,
               m.linear.NonDynamicallyQuantizableLinear, m.linear.Linear, m.dropout.Dropout,
               m.normalization.LayerNorm]
    with lib.serialization.safe_globals(allowed):
        back = lib.load(buf)
    assert back["act"] is lib.nn.functional.relu and back["layer"].activation is lib.nn.functional.relu
    x = lib.ones(3, 1, 4)
    assert lib.allclose(back["layer"](x), layer(x))
    buf.seek(0)
    refused = torch.serialization.pickle.UnpicklingError if lib is torch else ember.serialization.UnpicklingError
    with pytest.raises(refused):
        lib.load(buf)  # not allowed without safe_globals


def test_nn_modules_utils_module():
    # `from torch.nn.modules.utils import _pair` (custom conv layers) and
    # consume_prefix_in_state_dict_if_present (loading a DataParallel/DDP checkpoint into a bare model)
    import collections

    assert ember.nn.modules.utils._pair(3) == (3, 3) and ember.nn.modules.utils._triple((1, 2, 3)) == (1, 2, 3)
    assert ember.nn.utils.clip_grad_norm_ is not None  # ember.nn.utils stays nn.utils
    results = []
    for lib in (torch, ember):
        sd = collections.OrderedDict([("module.a", 1), ("b", 2), ("module.c.d", 3)])
        sd._metadata = {"": {"v": 1}, "module": {"v": 2}, "module.c": {"v": 3}}
        lib.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")
        results.append((list(sd.items()), sd._metadata))
    assert results[0] == results[1]
