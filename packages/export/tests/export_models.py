"""Models the export tests share, each defined once over a library (``ember`` or ``torch``)."""

from __future__ import annotations


def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 3))


def cnn(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))


def lstm(lib):
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


def encoder_layer(lib):
    nn = lib.nn
    return nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)


def mini_gpt(lib, vocab=50, d=32, heads=4, layers=2, ctx=16):
    nn = lib.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as in GPT-2

        def forward(self, idx):
            pos = lib.arange(idx.shape[1])
            x = self.tok(idx) + self.pos(pos)
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def copy_weights(src, dst) -> None:
    """Loads ``src``'s state (a torch or ember module) into ``dst`` (the other library)."""
    lib = __import__(type(next(iter(dst.state_dict().values()))).__module__.split(".")[0])
    dst.load_state_dict({k: lib.from_numpy(v.detach().numpy().copy()) for k, v in src.state_dict().items()})
