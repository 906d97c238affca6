# LoRA fine-tuning as loralib and peft's LoraLayer do it, from memory: a pretrained base trained first, then
# frozen with requires_grad_(False); LoRALinear wraps nn.Linear with lora_A (kaiming_uniform_(a=sqrt(5))) and
# lora_B (zeros), scaling = alpha / r, dropout on the LoRA path; mark_only_lora_as_trainable, parameter groups
# with different learning rates, a trainable-parameter count, lora-only state_dict saving, merging the
# weights (W += B @ A * scaling) under no_grad and unmerging, train()/eval() switching the merge, and
# checking that the frozen weights never changed. Then the parametrize form (LoRA from scratch as
# torch.nn.utils.parametrize tutorials write it): register_parametrization, cached(), disabling the adapter,
# and remove_parametrizations(leave_parametrized=True) merging it.
import io
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as parametrize
from _seedfree import data, seed_free_init


class LoRALinear(nn.Linear):
    def __init__(self, in_features, out_features, r=4, lora_alpha=8, lora_dropout=0.0, merge_weights=True, **kw):
        super().__init__(in_features, out_features, **kw)
        self.r, self.lora_alpha = r, lora_alpha
        self.lora_dropout = nn.Dropout(p=lora_dropout) if lora_dropout > 0 else (lambda x: x)
        self.merge_weights, self.merged = merge_weights, False
        self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
        self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
        self.scaling = self.lora_alpha / self.r
        self.weight.requires_grad = False
        self.reset_lora()

    def reset_lora(self):
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)

    def train(self, mode=True):
        super().train(mode)
        if mode and self.merge_weights and self.merged:
            self.weight.data -= (self.lora_B @ self.lora_A) * self.scaling
            self.merged = False
        elif not mode and self.merge_weights and not self.merged:
            self.weight.data += (self.lora_B @ self.lora_A) * self.scaling
            self.merged = True
        return self

    def forward(self, x):
        result = F.linear(x, self.weight, bias=self.bias)
        if self.r > 0 and not self.merged:
            result = result + (self.lora_dropout(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) \
                * self.scaling
        return result


def mark_only_lora_as_trainable(model, bias="none"):
    for n, p in model.named_parameters():
        if "lora_" not in n:
            p.requires_grad = False
    if bias == "lora_only":
        for m in model.modules():
            if isinstance(m, LoRALinear) and m.bias is not None:
                m.bias.requires_grad = True


def lora_state_dict(model):
    return {k: v for k, v in model.state_dict().items() if "lora_" in k}


class Net(nn.Module):
    def __init__(self, lora=False):
        super().__init__()
        lin = (lambda i, o: LoRALinear(i, o, r=2, lora_alpha=4)) if lora else nn.Linear
        self.embed = nn.Linear(6, 16)
        self.q = lin(16, 16)
        self.v = lin(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h = torch.tanh(self.embed(x))
        h = h + torch.relu(self.q(h)) * torch.sigmoid(self.v(h))
        return self.head(h)


X = data((48, 6), salt=231)
y_pre = (X[:, 0] > 0).long() + (X[:, 1] > 0.3).long()
y_new = (X[:, 2] + X[:, 3] > 0).long() * 2
base = seed_free_init(Net(), salt=232)
opt = torch.optim.SGD(base.parameters(), lr=0.3, momentum=0.9, nesterov=True)
for ep in range(5):
    loss = F.cross_entropy(base(X), y_pre)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"pretrain {ep} {loss.item():.6f}")

lora = Net(lora=True)
missing, unexpected = lora.load_state_dict(base.state_dict(), strict=False)
print("missing", sorted(missing), "unexpected", unexpected)
for m in lora.modules():
    if isinstance(m, LoRALinear):
        with torch.no_grad():
            m.lora_A.copy_(data(tuple(m.lora_A.shape), salt=233) * 0.5)
mark_only_lora_as_trainable(lora, bias="lora_only")
lora.head.requires_grad_(True)
trainable = sum(p.numel() for p in lora.parameters() if p.requires_grad)
total = sum(p.numel() for p in lora.parameters())
print(f"trainable params: {trainable} || all params: {total} || trainable%: {100 * trainable / total:.4f}")
print([n for n, p in lora.named_parameters() if p.requires_grad])
frozen_before = lora.q.weight.clone()
groups = [{"params": [p for n, p in lora.named_parameters() if "lora_" in n], "lr": 0.05},
          {"params": [p for n, p in lora.named_parameters() if p.requires_grad and "lora_" not in n], "lr": 0.01,
           "weight_decay": 1e-3}]
opt = torch.optim.AdamW(groups)
sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=4)
for ep in range(8):
    lora.train()
    loss = F.cross_entropy(lora(X), y_new, label_smoothing=0.05)
    opt.zero_grad()
    loss.backward()
    print(f"lora {ep} {loss.item():.6f} grad_B {lora.q.lora_B.grad.norm().item():.6f} "
          f"base grad {lora.q.weight.grad} lrs {[round(g['lr'], 6) for g in opt.param_groups]}")
    opt.step()
    sched.step()

print("frozen unchanged", torch.equal(frozen_before, lora.q.weight))
lora.train()
out_unmerged = lora(X)
lora.eval()
print("merged", lora.q.merged, lora.v.merged, "same output", torch.allclose(lora(X), out_unmerged, atol=1e-5))
lora.train()
print("unmerged equal", torch.allclose(lora.q.weight, frozen_before, atol=1e-6))
sd = lora_state_dict(lora)
buf = io.BytesIO()
torch.save(sd, buf)
buf.seek(0)
back = torch.load(buf)
print(sorted(back), [tuple(v.shape) for v in back.values()], all(not v.requires_grad for v in back.values()))
fresh = Net(lora=True)
fresh.load_state_dict(base.state_dict(), strict=False)
fresh.load_state_dict(back, strict=False)
fresh.head.load_state_dict(lora.head.state_dict())
fresh.q.bias.data.copy_(lora.q.bias)
fresh.v.bias.data.copy_(lora.v.bias)
print("reloaded output matches", torch.allclose(fresh(X), lora(X), atol=1e-6))
with torch.no_grad():
    delta = lora.q.lora_B @ lora.q.lora_A * lora.q.scaling
print(f"delta rank {torch.linalg.matrix_rank(delta).item()} norm {delta.norm().item():.6f}")


# --- the parametrize form

class LoRAParametrization(nn.Module):
    def __init__(self, features_in, features_out, rank=2, alpha=4):
        super().__init__()
        self.lora_A = nn.Parameter(torch.zeros((rank, features_out)))
        self.lora_B = nn.Parameter(torch.zeros((features_in, rank)))
        nn.init.normal_(self.lora_A, mean=0, std=1)
        self.scale = alpha / rank
        self.enabled = True
    def forward(self, original_weights):
        if self.enabled:
            return original_weights + torch.matmul(self.lora_B, self.lora_A).view(original_weights.shape) * self.scale
        return original_weights

net = seed_free_init(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), salt=5)
for layer in (net[0], net[2]):
    parametrize.register_parametrization(layer, "weight",
                                         LoRAParametrization(layer.weight.shape[0], layer.weight.shape[1]))
print(net)
print(sorted(net.state_dict()))
print(parametrize.is_parametrized(net[0]), parametrize.is_parametrized(net[0], "bias"),
      type(net[0].parametrizations.weight).__name__)
for n, p in net.named_parameters():
    if "lora" not in n:
        p.requires_grad = False
print([n for n, p in net.named_parameters() if p.requires_grad])
x = data((16, 6), salt=6)
y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-2)
for step in range(5):
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, f"{loss.item():.6f}", net[0].parametrizations.weight.original.grad)
with parametrize.cached():
    a = net(x)
    b = net[0].weight is net[0].weight
print("cached", b, f"{a.sum().item():.6f}")
for layer in (net[0], net[2]):
    layer.parametrizations["weight"][0].enabled = False
print("disabled", f"{net(x).sum().item():.6f}")
for layer in (net[0], net[2]):
    layer.parametrizations["weight"][0].enabled = True
before = net(x)
parametrize.remove_parametrizations(net[0], "weight", leave_parametrized=True)
print("merged", torch.allclose(before, net(x)), type(net[0].weight).__name__, net[0].weight.requires_grad,
      sorted(net[0].state_dict()))
try:
    parametrize.remove_parametrizations(net[0], "weight")
except ValueError as e:
    print("ValueError", e)
print(net)
