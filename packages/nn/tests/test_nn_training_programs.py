"""Ordinary PyTorch training programs, written once against ``lib`` and run with ``lib`` = torch
and ``lib`` = ember from the same initial weights: the loss curves and final weights agree.

This is the compatibility promise in small: a script changes its import and nothing else.
Programs run in float64 (``set_default_dtype``) so that agreement can be checked tightly
over many steps; dropout is 0 because the two libraries draw different random numbers.
"""

import io

import numpy as np
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def float64_default():
    torch_before, ember_before = torch.get_default_dtype(), ember.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    ember.set_default_dtype(ember.float64)
    yield
    torch.set_default_dtype(torch_before)
    ember.set_default_dtype(ember_before)


def _copy_weights(src, dst) -> None:
    src_state, dst_state = src.state_dict(), dst.state_dict()
    assert list(src_state) == list(dst_state)
    dst.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy()) for k, v in src_state.items()})


def _data(n, shape, classes=None, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, *shape))
    if classes:
        return x, rng.integers(0, classes, n)
    flat = x.reshape(n, -1)
    return x, np.sin(flat[:, :1]) + 0.5 * flat[:, 1:2]  # a learnable regression target


def _run(program, lib, model, x, y, steps):
    """Runs program(lib, model, loader) and returns (losses, final state dict as NumPy)."""
    data = lib.utils.data
    dataset = data.TensorDataset(lib.from_numpy(x.copy()), lib.from_numpy(y.copy()))
    loader = data.DataLoader(dataset, batch_size=16, shuffle=False)
    losses = program(lib, model, loader, steps)
    return losses, {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _compare(program, build, x, y, steps, rtol=1e-7, atol=1e-9):
    t_model = build(torch)
    e_model = build(ember)
    _copy_weights(t_model, e_model)
    t_losses, t_state = _run(program, torch, t_model, x, y, steps)
    e_losses, e_state = _run(program, ember, e_model, x, y, steps)
    np.testing.assert_allclose(e_losses, t_losses, rtol=rtol, atol=atol)
    assert list(e_state) == list(t_state)
    for key in t_state:
        np.testing.assert_allclose(e_state[key], t_state[key], rtol=rtol * 10, atol=atol * 10, err_msg=key)
    return t_losses


def _train_epochs(lib, model, loader, opt, loss_fn, epochs, scheduler=None, clip=None):
    losses = []
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            if clip is not None:
                lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            losses.append(loss.item())
        if scheduler is not None:
            scheduler.step()
    return losses


def test_mlp_regression_sgd_momentum_step_lr_and_clipping():
    def build(lib):
        nn = lib.nn
        return nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 1))

    def program(lib, model, loader, epochs):
        opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return _train_epochs(lib, model, loader, opt, lib.nn.MSELoss(), epochs, sched, clip=1.0)

    x, y = _data(64, (6,))
    losses = _compare(program, build, x, y, steps=5)
    assert np.mean(losses[-4:]) < np.mean(losses[:4])  # 4 batches per epoch: it learns


def test_cnn_classifier_adam_batchnorm_pooling_cosine_schedule():
    def build(lib):
        nn = lib.nn
        return nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding="same"), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Dropout(0.0), nn.Linear(8, 3))

    def program(lib, model, loader, epochs):
        opt = lib.optim.Adam(model.parameters(), lr=1e-2)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
        losses = _train_epochs(lib, model, loader, opt, lib.nn.CrossEntropyLoss(label_smoothing=0.1), epochs, sched)
        model.eval()
        with lib.no_grad():
            losses.append(float(model(next(iter(loader))[0]).sum()))  # eval mode uses running stats
        return losses

    x, y = _data(48, (1, 8, 8), classes=3)
    _compare(program, build, x, y, steps=3, rtol=1e-6, atol=1e-8)


def test_lstm_sequence_classifier_rmsprop():
    def build(lib):
        nn = lib.nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(5, 12, num_layers=2, batch_first=True)
                self.head = nn.Linear(12, 4)

            def forward(self, x):
                out, (h, c) = self.rnn(x)
                return self.head(out[:, -1] + h[-1])

        return Net()

    def program(lib, model, loader, epochs):
        opt = lib.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.5)
        return _train_epochs(lib, model, loader, opt, lib.nn.functional.cross_entropy, epochs)

    x, y = _data(32, (7, 5), classes=4)
    _compare(program, build, x, y, steps=3, rtol=1e-6, atol=1e-8)


def test_transformer_encoder_classifier_adamw_with_padding_mask():
    def build(lib):
        nn = lib.nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Linear(4, 16)
                layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
                self.encoder = nn.TransformerEncoder(layer, num_layers=2)
                self.head = nn.Linear(16, 2)

            def forward(self, x):
                mask = lib.zeros(x.shape[0], x.shape[1], dtype=lib.bool)
                mask[:, -1] = True
                return self.head(self.encoder(self.embed(x), src_key_padding_mask=mask).mean(dim=1))

        return Net()

    def program(lib, model, loader, epochs):
        opt = lib.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
        return _train_epochs(lib, model, loader, opt, lib.nn.CrossEntropyLoss(), epochs)

    x, y = _data(32, (6, 4), classes=2)
    _compare(program, build, x, y, steps=2, rtol=1e-6, atol=1e-8)


def test_checkpoint_resume_matches_uninterrupted_training():
    """Save model + optimizer mid-training with lib.save, load into fresh objects, continue."""

    def build(lib):
        return lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.ReLU(), lib.nn.Linear(8, 1))

    def program(lib, model, loader, epochs):
        opt = lib.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
        losses = _train_epochs(lib, model, loader, opt, lib.nn.MSELoss(), 1)
        buffer = io.BytesIO()
        lib.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
        buffer.seek(0)
        state = lib.load(buffer, weights_only=True)
        fresh = build(lib)
        fresh.load_state_dict(state["model"])
        fresh_opt = lib.optim.Adam(fresh.parameters(), lr=1.0, amsgrad=True)
        fresh_opt.load_state_dict(state["opt"])
        losses += _train_epochs(lib, fresh, loader, fresh_opt, lib.nn.MSELoss(), epochs - 1)
        model.load_state_dict(fresh.state_dict())
        return losses

    x, y = _data(48, (6,))
    _compare(program, build, x, y, steps=3)
