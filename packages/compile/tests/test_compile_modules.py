"""Compiled modules: OptimizedModule's PyTorch behaviour, BatchNorm buffers, training loops,
and the nn package's models compiled with backend="aot_eager": the same losses as eager
over 10 steps (ember eager is the oracle; torch's eager checks the programs themselves)."""

import copy

import numpy as np
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def float64_default():
    before = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    yield
    ember.set_default_dtype(before)


def test_optimized_module_shares_parameters_and_state_dict_keys():
    for lib in (torch, ember):
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4))
        opt = lib.compile(model, backend="eager")
        assert opt._orig_mod is model
        assert [p is q for p, q in zip(opt.parameters(), model.parameters())] == [True] * 4
        assert type(opt).__name__ == "OptimizedModule"
        assert isinstance(opt, lib.nn.Module)
        keys = list(opt.state_dict())
        assert keys[0] == "_orig_mod.0.weight" and "_orig_mod.1.running_mean" in keys
        opt.eval()
        assert not model.training and not model[1].training
        opt.train()
        assert model.training
        assert opt.training is True
        lin = lib.nn.Linear(2, 2)
        assert lib.compile(lin).weight is lin.weight  # attributes reach the original module
    ember_keys = list(ember.compile(ember.nn.Linear(2, 2)).state_dict())
    torch_keys = list(torch.compile(torch.nn.Linear(2, 2)).state_dict())
    assert ember_keys == torch_keys


def test_module_compile_in_place_and_hooks():
    model = ember.nn.Linear(3, 2)
    calls = []
    model.register_forward_hook(lambda m, i, o: calls.append(o.shape))
    compiled = ember.compile(model, backend="eager")
    x = ember.ones(4, 3)
    np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy())
    assert calls == [(4, 2), (4, 2)]
    m2 = ember.nn.Linear(3, 2)
    graphs = []
    m2.compile(backend=lambda gm, ex: graphs.append(gm) or gm.forward)
    np.testing.assert_allclose(m2(x).detach().numpy(), (x @ m2.weight.T + m2.bias).detach().numpy())
    assert len(graphs) == 1
    assert list(m2.state_dict()) == ["weight", "bias"]  # in place: no _orig_mod prefix, as PyTorch


def test_batchnorm_running_stats_and_train_eval_switch():
    torch_bn = torch.nn.BatchNorm1d(3, dtype=torch.float64)
    bn = ember.nn.BatchNorm1d(3)
    ref = copy.deepcopy(bn)
    compiled = ember.compile(bn, backend="eager")
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((8, 3))
        out = compiled(ember.from_numpy(x))
        expect = ref(ember.from_numpy(x))
        t_out = torch_bn(torch.from_numpy(x))
        np.testing.assert_allclose(out.detach().numpy(), expect.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(bn.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), torch_bn.running_var.numpy(), rtol=1e-6, atol=1e-6)
    assert bn.num_batches_tracked.item() == 3
    compiled.eval()
    ref.eval()
    x = ember.from_numpy(rng.standard_normal((4, 3)))
    np.testing.assert_allclose(compiled(x).detach().numpy(), ref(x).detach().numpy(), rtol=1e-12)


def _mlp(nn):
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def _cnn(nn):
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 3))


class _LSTM(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = ember.nn.LSTM(6, 8, batch_first=True)
        self.head = ember.nn.Linear(8, 3)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return self.head(out[:, -1] + h[-1])


class _Encoder(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = ember.nn.TransformerEncoderLayer(6, 2, dim_feedforward=12, dropout=0.0, batch_first=True)
        self.head = ember.nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.layer(x).mean(dim=1))


class _GPT(ember.nn.Module):
    """A mini-GPT: token + position embeddings, causal self-attention blocks, tied head."""

    def __init__(self, vocab=11, dim=8, heads=2, layers=2, ctx=5):
        super().__init__()
        nn = ember.nn
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(ctx, dim)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0, batch_first=True,
                                       norm_first=True)
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        h = self.tok(idx) + self.pos(ember.arange(t))
        mask = ember.nn.Transformer.generate_square_subsequent_mask(t)
        for block in self.blocks:
            h = block(h, src_mask=mask, is_causal=True)
        return self.head(self.norm(h))


def _train(model, xs, ys, steps, loss_fn, compiled_backend=None):
    opt = ember.optim.Adam(model.parameters(), lr=1e-2)
    run = ember.compile(model, backend=compiled_backend) if compiled_backend else model
    losses = []
    for step in range(steps):
        opt.zero_grad()
        out = run(xs[step % len(xs)])
        loss = loss_fn(out, ys[step % len(ys)])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "lstm", "transformer_encoder", "gpt"])
def test_nn_models_aot_eager_same_losses_as_eager_over_10_steps(name):
    rng = np.random.default_rng(1)
    nn = ember.nn
    ce = nn.functional.cross_entropy
    if name == "mlp":
        build, xs = (lambda: _mlp(nn)), [rng.standard_normal((8, 6)) for _ in range(2)]
    elif name == "cnn_bn":
        build, xs = (lambda: _cnn(nn)), [rng.standard_normal((8, 1, 6, 6)) for _ in range(2)]
    elif name == "lstm":
        build, xs = _LSTM, [rng.standard_normal((4, 5, 6)) for _ in range(2)]
    elif name == "transformer_encoder":
        build, xs = _Encoder, [rng.standard_normal((4, 5, 6)) for _ in range(2)]
    else:
        build = _GPT
        xs = [rng.integers(0, 11, (3, 5)) for _ in range(2)]
    if name == "gpt":
        ys = [ember.from_numpy(rng.integers(0, 11, (3 * 5,))) for _ in range(2)]

        def loss_fn(out, y):
            return ce(out.reshape(-1, out.shape[-1]), y)
        inputs = [ember.from_numpy(x) for x in xs]
    else:
        ys = [ember.from_numpy(rng.integers(0, 3, (x.shape[0],))) for x in xs]
        loss_fn = ce
        inputs = [ember.from_numpy(x) for x in xs]
    ember.manual_seed(0)
    eager_model = build()
    compiled_model = copy.deepcopy(eager_model)
    eager = _train(eager_model, inputs, ys, 10, loss_fn)
    compiled = _train(compiled_model, inputs, ys, 10, loss_fn, compiled_backend="aot_eager")
    np.testing.assert_allclose(compiled, eager, rtol=1e-9, atol=1e-12)
    for (k, a), b in zip(eager_model.state_dict().items(), compiled_model.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-8, atol=1e-11, err_msg=k)


def test_training_step_compiled_whole_matches_eager():
    """A whole training step (forward, backward, optimizer) inside one compiled function."""

    def make():
        ember.manual_seed(0)
        model = _mlp(ember.nn)
        return model, ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(2)
    x = ember.from_numpy(rng.standard_normal((8, 6)))
    y = ember.from_numpy(rng.integers(0, 3, (8,)))
    m1, o1 = make()
    m2, o2 = make()
    compiled_step = ember.compile(step, backend="eager")
    # Within 1e-12, not bit for bit: eager SGD runs the fused native update, whose p - lr * d the C
    # compiler may contract into one FMA, while the captured graph computes it as its ops (mul, then
    # sub: two roundings), so parameters can differ in the last bit (as PyTorch's compiled
    # optimizers differ from eager within a tolerance).
    for _ in range(4):
        a = step(m1, o1, x, y).item()
        b = compiled_step(m2, o2, x, y).item()
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=0)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-12, atol=1e-15)


def test_training_mode_change_recompiles_dropout():
    model = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.Dropout(0.5))
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = ember.compile(model, backend=backend)
    x = ember.ones(2, 4)
    compiled(x)
    compiled.eval()
    out = compiled(x)
    np.testing.assert_allclose(out.detach().numpy(), model(x).detach().numpy())
    assert len(graphs) == 2
    torch_model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    torch_graphs = []
    torch._dynamo.reset()
    compiled = torch.compile(torch_model, backend=lambda gm, ex: torch_graphs.append(gm) or gm.forward)
    compiled(torch.ones(2, 4))
    compiled.eval()
    compiled(torch.ones(2, 4))
    assert len(torch_graphs) == len(graphs)
