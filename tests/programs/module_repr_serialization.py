# What a program prints about its model and what it writes to disk: print(model) for a model built
# from many layer kinds (extra_repr of convolutions, norms, recurrent layers, attention, pooling,
# activations with arguments, containers nested in ModuleList/ModuleDict/Sequential with
# OrderedDict names, a custom extra_repr), parameter counts, named_buffers, state_dict key order;
# state-dict hooks (register_state_dict_pre_hook, register_state_dict_post_hook, load-state-dict
# pre/post hooks fixing renamed keys); torch.save/torch.load with weights_only=True of nested
# containers (tuples, OrderedDict, None, ints, floats, strings, dtypes, Size), tensors sharing one
# storage (views stay views after loading), non-contiguous and zero-size tensors, map_location,
# mmap=True, the safe_globals context and add_safe_globals for a user class, the full GradScaler and
# optimizer states, and get_default_dtype / set_printoptions-free tensor reprs of small tensors.
import collections
import io
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


class Scale(nn.Module):
    def __init__(self, factor, learnable=False):
        super().__init__()
        self.factor = factor
        self.learnable = learnable

    def extra_repr(self):
        return f"factor={self.factor}, learnable={self.learnable}"

    def forward(self, x):
        return x * self.factor


model = nn.Sequential(collections.OrderedDict([
    ("stem", nn.Sequential(nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8),
                           nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))),
    ("blocks", nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1, groups=2, dilation=1, padding_mode="reflect"),
                              nn.GroupNorm(2, 8, eps=1e-6), nn.Dropout2d(0.1)])),
    ("heads", nn.ModuleDict({"cls": nn.Linear(8, 4), "reg": nn.Sequential(nn.Linear(8, 2, bias=False), nn.Tanh())})),
    ("rnn", nn.LSTM(8, 6, num_layers=2, batch_first=True, dropout=0.1, bidirectional=True)),
    ("gru", nn.GRU(4, 3)),
    ("attn", nn.MultiheadAttention(8, 2, batch_first=True)),
    ("enc", nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True)),
    ("misc", nn.Sequential(nn.LeakyReLU(0.2), nn.ELU(alpha=0.5), nn.Hardtanh(-2, 2), nn.Softmax(dim=1),
                           nn.LogSoftmax(dim=-1), nn.GELU(approximate="tanh"), nn.Softplus(beta=2, threshold=10),
                           nn.PReLU(3), nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                           nn.AdaptiveAvgPool2d((1, 1)), nn.AvgPool2d(2, ceil_mode=True), nn.Flatten(1),
                           nn.Unflatten(1, (2, 4)), nn.Embedding(10, 4, padding_idx=0, max_norm=1.0),
                           nn.EmbeddingBag(10, 4, mode="max"), nn.LayerNorm([4], elementwise_affine=False),
                           nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1, output_padding=0),
                           nn.Conv1d(4, 4, 3, bias=False), nn.BatchNorm1d(4, affine=False, track_running_stats=False),
                           nn.InstanceNorm2d(3, affine=True), nn.Identity(), nn.Bilinear(3, 4, 5),
                           nn.PixelShuffle(2), nn.ZeroPad2d((1, 0, 2, 0)), nn.CrossEntropyLoss(label_smoothing=0.1),
                           nn.Threshold(0.1, 20.0), nn.RNNCell(3, 4, nonlinearity="relu"), Scale(0.5))),
]))
print(model)
print("params", sum(p.numel() for p in model.parameters()),
      "trainable", sum(p.numel() for p in model.parameters() if p.requires_grad))
print("buffers", [(n, tuple(b.shape)) for n, b in model.named_buffers()][:6])
keys = list(model.state_dict().keys())
print("state_dict keys", len(keys), keys[:12], keys[-6:])
print("rnn params", [n for n, _ in model.rnn.named_parameters()][:6])
print("repr of small tensors", torch.tensor([1.5, -2.0]), torch.tensor([[1, 2]]), torch.zeros(0, 3),
      torch.tensor(3.25, dtype=torch.float64), torch.tensor([True, False]), torch.ones(2, requires_grad=True))

# state-dict hooks: a pre-hook, a post-hook dropping a key, and load-time renaming
lin = nn.Linear(3, 2)
seen = []
lin.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: seen.append(("pre", prefix, keep_vars)))


def drop_bias(module, state_dict, prefix, local_metadata):
    seen.append(("post", prefix, sorted(state_dict)))
    state_dict.pop(prefix + "bias", None)


lin.register_state_dict_post_hook(drop_bias)
wrapper = nn.Sequential(lin)
sd = wrapper.state_dict(keep_vars=True)
print("hooked state_dict", sorted(sd), seen, type(sd["0.weight"]).__name__)


def rename_old_keys(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    if prefix + "w" in state_dict:
        state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")


new_lin = nn.Linear(3, 2)
new_lin._register_load_state_dict_pre_hook(rename_old_keys, with_module=True)
post = []
new_lin.register_load_state_dict_post_hook(lambda mod, result: post.append((sorted(result.missing_keys),
                                                                            sorted(result.unexpected_keys))))
res = new_lin.load_state_dict({"w": lin.weight.detach().clone(), "extra": torch.ones(1)}, strict=False)
print("load result", sorted(res.missing_keys), sorted(res.unexpected_keys), post,
      torch.equal(new_lin.weight, lin.weight))

# checkpoints: shared storages, odd tensors, containers, map_location, mmap, safe globals
base = torch.arange(12.0)
payload = {
    "base": base,
    "view": base[2:8].view(2, 3),
    "transposed": torch.arange(6.0).view(2, 3).t(),
    "empty": torch.zeros(0, 4),
    "half": torch.tensor([1.5, 2.5], dtype=torch.float16),
    "int": torch.tensor([[1, 2], [3, 4]], dtype=torch.int32),
    "bool": torch.tensor([True, False, True]),
    "scalar": torch.tensor(7.0),
    "meta": collections.OrderedDict(epoch=3, lr=0.1, name="run", flags=(True, None), size=torch.Size([2, 3]),
                                    dtype=torch.bfloat16),
    "nested": [1, (2.0, [torch.ones(1)]), {"a": None}],
}
buf = io.BytesIO()
torch.save(payload, buf)
buf.seek(0)
loaded = torch.load(buf, weights_only=True)
print("loaded keys", list(loaded), "meta", loaded["meta"], type(loaded["meta"]).__name__)
print("view shares storage", loaded["view"].untyped_storage().data_ptr() == loaded["base"].untyped_storage().data_ptr(),
      loaded["view"].storage_offset(), loaded["view"].stride())
loaded["base"][3] = 100.0
print("write through view", loaded["view"].tolist())
print("transposed", loaded["transposed"].stride(), loaded["transposed"].is_contiguous(), loaded["transposed"].tolist())
print("others", loaded["empty"].shape, loaded["half"].dtype, loaded["int"].tolist(), loaded["bool"].tolist(),
      loaded["scalar"].item(), loaded["nested"])
buf.seek(0)
on_cpu = torch.load(buf, weights_only=True, map_location="cpu")
print("map_location cpu", on_cpu["base"].device, on_cpu["half"].tolist())
buf.seek(0)
remapped = torch.load(buf, weights_only=True, map_location=lambda storage, loc: storage)
print("map_location fn", remapped["int"].tolist())

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "ckpt.pt")
    torch.save({"w": torch.arange(6.0).view(2, 3), "step": 5}, path)
    mm = torch.load(path, weights_only=True, mmap=True)
    print("mmap", mm["w"].tolist(), mm["step"])


class RunConfig:
    def __init__(self, lr, layers):
        self.lr, self.layers = lr, layers

    def __eq__(self, other):
        return isinstance(other, RunConfig) and (self.lr, self.layers) == (other.lr, other.layers)


buf = io.BytesIO()
torch.save({"cfg": RunConfig(0.01, [2, 3])}, buf)
for attempt in ("refused", "context", "global"):
    buf.seek(0)
    try:
        if attempt == "refused":
            torch.load(buf, weights_only=True)
        elif attempt == "context":
            with torch.serialization.safe_globals([RunConfig]):
                out = torch.load(buf, weights_only=True)
            print("safe_globals context", out["cfg"] == RunConfig(0.01, [2, 3]))
        else:
            torch.serialization.add_safe_globals([RunConfig])
            out = torch.load(buf, weights_only=True)
            print("add_safe_globals", out["cfg"].layers, RunConfig in torch.serialization.get_safe_globals())
            torch.serialization.clear_safe_globals()
    except Exception as e:  # noqa: BLE001
        print(attempt, type(e).__name__)

# optimizer + GradScaler + scheduler state through weights_only
net = nn.Linear(4, 2)
opt = torch.optim.AdamW(net.parameters(), lr=0.01, amsgrad=True)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
for _ in range(3):
    opt.zero_grad()
    loss = net(torch.randn(5, 4)).pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    sched.step()
buf = io.BytesIO()
torch.save({"opt": opt.state_dict(), "sched": sched.state_dict(), "scaler": scaler.state_dict()}, buf)
buf.seek(0)
state = torch.load(buf, weights_only=True)
print("scaler state", state["scaler"])
print("opt groups", [(k, v) for k, v in state["opt"]["param_groups"][0].items() if k != "params"][:8])
print("opt state", sorted(state["opt"]["state"][0]), state["opt"]["state"][0]["step"])
print("sched", {k: v for k, v in state["sched"].items() if k in ("last_epoch", "total_steps", "_step_count")})
