"""ember vs PyTorch: one training step (forward, backward, optimizer step) of four models.

- MLP 784-1024-1024-10, batch 256, SGD with momentum;
- a LeNet-like CNN on 1x28x28, batch 64, Adam;
- a 2-layer LSTM (input 64, hidden 256, seq 50, batch 32), SGD;
- a 4-layer GPT-style transformer (d 256, 4 heads, seq 128, batch 16, vocab 1000, causal), AdamW.

Each model is written once against ``lib.nn`` and built in both libraries with the same
weights. Prints the median step time per side (best of three alternating rounds) and the
ratio ember/torch, one thread first (the primary figure), then two threads. One thread is
timed in process CPU time (on a shared machine wall time measures the scheduler), the two
sides alternating so both see the same load; --wall times wall clock, as the two-thread
figure always is.

    python benchmarks/bench_training.py [--repeat 10] [--only mlp,cnn,lstm,gpt] [--wall]
    python benchmarks/bench_training.py --only optstep

``optstep`` times ``optimizer.step()`` alone over 148 small parameters (a GPT's count; 8 elements
each, so the per-step bookkeeping, not the arithmetic, is what is timed), for SGD with momentum,
Adam and AdamW, one thread, process CPU time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

# ruff: noqa: I001 - ember is imported before torch on purpose (shared libgomp settings; see bench_nn.py).
import ember
import torch

from _timing import median_time


def mlp(lib):
    nn = lib.nn
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    return model, lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), ((256, 784), "float"), ((256,), 10)


def cnn(lib):
    nn = lib.nn
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    return model, lib.optim.Adam(model.parameters(), lr=1e-3), ((64, 1, 28, 28), "float"), ((64,), 10)


def lstm(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(64, 256, num_layers=2, batch_first=True)
            self.head = nn.Linear(256, 10)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    model = Net()
    return model, lib.optim.SGD(model.parameters(), lr=0.01), ((32, 50, 64), "float"), ((32,), 10)


def gpt(lib):
    nn = lib.nn
    vocab, d, heads, layers, seq = 1000, 256, 4, 4, 128

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, layers)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
            x = self.blocks(x, mask=self.mask, is_causal=True)
            return self.head(self.norm(x)).reshape(-1, vocab)

    model = GPT()
    return model, lib.optim.AdamW(model.parameters(), lr=3e-4), ((16, seq), vocab), ((16 * seq,), vocab)


MODELS = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "gpt": gpt}


def _copy_weights(src, dst) -> None:
    with ember.no_grad():
        for (name, tp), (_, ep) in zip(src.named_parameters(), dst.named_parameters()):
            if tuple(tp.shape) != tuple(ep.shape):
                raise RuntimeError(f"parameter {name}: shapes differ {tuple(tp.shape)} vs {tuple(ep.shape)}")
            ep.copy_(ember.from_numpy(tp.detach().numpy().copy()))


def _step_fn(lib, model, optimizer, x, y):
    loss_fn = lib.nn.functional.cross_entropy

    def step():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    return step


def run(name: str, repeat: int, wall: bool = False) -> None:
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    t_model, t_opt, (x_shape, x_kind), (y_shape, classes) = MODELS[name](torch)
    e_model, e_opt, _, _ = MODELS[name](ember)
    _copy_weights(t_model, e_model)
    if x_kind == "float":
        x = rng.standard_normal(x_shape, dtype=np.float32)
    else:
        x = rng.integers(0, x_kind, x_shape)
    y = rng.integers(0, classes, y_shape)
    steps = {
        "torch": _step_fn(torch, t_model, t_opt, torch.from_numpy(x), torch.from_numpy(y)),
        "ember": _step_fn(ember, e_model, e_opt, ember.from_numpy(x), ember.from_numpy(y)),
    }
    for threads in (1, 2):
        torch.set_num_threads(threads)
        ember.set_num_threads(threads)
        clock = time.perf_counter if wall or threads > 1 else time.process_time
        times = {side: [] for side in steps}
        for _ in range(3):  # alternate the sides: a load change hits both
            for side, fn in steps.items():
                times[side].append(median_time(fn, max(1, repeat // 3), clock=clock))
        times = {side: min(t) for side, t in times.items()}
        print(f"{name:5s} {threads} thread{'s' if threads > 1 else ' '}  torch {times['torch'] * 1e3:8.2f} ms  "
              f"ember {times['ember'] * 1e3:8.2f} ms  ratio {times['ember'] / times['torch']:.2f}")


def optimizer_steps(repeat: int) -> None:
    """``optimizer.step()`` alone over 148 eight-element parameters whose grads are set once."""
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(8, dtype=np.float32) for _ in range(148)]
    grads = [rng.standard_normal(8, dtype=np.float32) for _ in range(148)]
    kinds = {"SGD momentum": lambda lib, ps: lib.optim.SGD(ps, lr=1e-3, momentum=0.9),
             "Adam": lambda lib, ps: lib.optim.Adam(ps, lr=1e-3),
             "AdamW": lambda lib, ps: lib.optim.AdamW(ps, lr=1e-3)}
    for name, make in kinds.items():
        steps = {}
        for lib in (torch, ember):
            params = [lib.nn.Parameter(lib.from_numpy(v.copy())) for v in values]
            for p, g in zip(params, grads):
                p.grad = lib.from_numpy(g.copy())
            steps[lib.__name__] = make(lib, params).step
        times = {side: [] for side in steps}
        for _ in range(3):
            for side, fn in steps.items():
                times[side].append(median_time(fn, repeat * 20, warmup=20, clock=time.process_time))
        times = {side: min(t) for side, t in times.items()}
        print(f"optstep {name:12s} 148 params  torch {times['torch'] * 1e6:8.1f} us  ember {times['ember'] * 1e6:8.1f} "
              f"us  ratio {times['ember'] / times['torch']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--only", default=",".join(MODELS))
    parser.add_argument("--wall", action="store_true", help="time one thread in wall clock too")
    args = parser.parse_args()
    for name in args.only.split(","):
        if name == "optstep":
            optimizer_steps(args.repeat)
        else:
            run(name, args.repeat, args.wall)


if __name__ == "__main__":
    main()
