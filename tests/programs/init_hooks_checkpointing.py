# Model-construction idioms: init schemes applied through named_modules()/apply() (trunc_normal_
# with bounds, kaiming_uniform_/kaiming_normal_ in fan_in and fan_out modes with a and nonlinearity,
# xavier_normal_ with calculate_gain, orthogonal_ with gain, sparse_, eye_, dirac_, constant_ by
# name pattern), the fan computation from _calculate_fan_in_and_fan_out, forward pre-hooks and
# forward hooks with kwargs (with_kwargs=True) that rewrite arguments and outputs, prepend=True
# ordering, always_call, full backward pre-hooks and hooks, global module hooks, hook handles
# removed; activation checkpointing (torch.utils.checkpoint with use_reentrant True and False,
# dropout RNG preserved between the forward and the recomputation, checkpoint_sequential,
# non-tensor arguments and keyword arguments) with gradients equal to the plain run; and grad-mode
# decorators (torch.no_grad and torch.enable_grad on functions, set_grad_enabled, inference_mode
# as decorator and context, is_grad_enabled, is_inference_mode_enabled).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


def stats(t):
    return [round(t.mean().item(), 5), round(t.std().item(), 5), round(t.min().item(), 5), round(t.max().item(), 5)]


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(0.2)

    def forward(self, x, scale=1.0):
        return x + scale * self.drop(self.fc2(F.gelu(self.fc1(self.norm(x)))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.rnn = nn.GRU(8, 6, batch_first=True)
        self.blocks = nn.ModuleList(Block(6) for _ in range(2))
        self.embed = nn.Embedding(10, 6, padding_idx=0)
        self.head = nn.Linear(6, 3)

    def forward(self, img, tokens):
        h = F.relu(self.bn(self.conv(F.relu(self.stem(img)))))
        seq = h.flatten(2).transpose(1, 2)
        out, _ = self.rnn(seq)
        x = out[:, -1] + self.embed(tokens).mean(1)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def init_weights(m):
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02, a=-0.04, b=0.04)
        nn.init.constant_(m.bias, 0.01)
    elif isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Embedding):
        nn.init.normal_(m.weight, std=0.1)
        with torch.no_grad():
            m.weight[m.padding_idx].zero_()


net = Net()
net.apply(init_weights)
for name, p in net.rnn.named_parameters():
    if "weight_ih" in name:
        nn.init.xavier_normal_(p, gain=nn.init.calculate_gain("tanh"))
    elif "weight_hh" in name:
        nn.init.orthogonal_(p, gain=0.9)
    else:
        nn.init.zeros_(p)
for name, module in net.named_modules():
    if name.endswith("fc2"):
        nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), mode="fan_in", nonlinearity="leaky_relu")
        print("scaled", name)
print("modules", [n for n, _ in net.named_modules()][:8], len(list(net.named_modules())))
print("children", [n for n, _ in net.named_children()])
print("stem", stats(net.stem.weight), "head", stats(net.head.weight), "bias", r(net.head.bias))
print("gru ih", stats(net.rnn.weight_ih_l0), "hh", stats(net.rnn.weight_hh_l0))
hh = net.rnn.weight_hh_l0[:6]
print("orthogonal rows", r(hh @ hh.t() / 0.81, 4)[0])
print("fc2", stats(net.blocks[0].fc2.weight), "embedding pad row", r(net.embed.weight[0]))
for shape in [(5, 3), (8, 4, 3, 3), (6, 2, 5), (7,)[:0] + (4, 4)]:
    print("fans", shape, nn.init._calculate_fan_in_and_fan_out(torch.empty(shape)))
print("gains", [round(nn.init.calculate_gain(n, p), 5) for n, p in
                [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                 ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]])
for mode in ("fan_in", "fan_out"):
    w = torch.empty(40, 20)
    nn.init.kaiming_uniform_(w, mode=mode, nonlinearity="relu")
    print("kaiming_uniform", mode, stats(w))
    nn.init.kaiming_normal_(w, a=0.1, mode=mode)
    print("kaiming_normal", mode, stats(w))
w = torch.empty(10, 8)
nn.init.sparse_(w, sparsity=0.5, std=0.1)
print("sparse zeros per column", (w == 0).sum(0).tolist())
print("eye", nn.init.eye_(torch.empty(3, 4)).tolist())
d = nn.init.dirac_(torch.empty(4, 2, 3), groups=2)
print("dirac", d.nonzero().tolist())
u = nn.init.uniform_(torch.empty(3, 3), -0.1, 0.1)
print("uniform in range", bool((u.abs() <= 0.1).all()), "xavier uniform",
      stats(nn.init.xavier_uniform_(torch.empty(30, 20))))
t = nn.init.trunc_normal_(torch.empty(1000), mean=1.0, std=2.0, a=-1.0, b=2.0)
print("trunc bounds", round(t.min().item(), 4) >= -1.0, round(t.max().item(), 4) <= 2.0, stats(t))

# hooks with kwargs: the pre-hook doubles the scale keyword, the forward hook sees it too
calls = []


def pre_hook(module, args, kwargs):
    calls.append(("pre", type(module).__name__, sorted(kwargs)))
    kwargs = dict(kwargs, scale=kwargs.get("scale", 1.0) * 2)
    return args, kwargs


def first_pre_hook(module, args):
    calls.append(("first",))


def fwd_hook(module, args, kwargs, output):
    calls.append(("fwd", kwargs.get("scale")))
    return output * 0 + output  # a new tensor with the same values


blk = net.blocks[0]
h1 = blk.register_forward_pre_hook(pre_hook, with_kwargs=True)
h2 = blk.register_forward_pre_hook(first_pre_hook, prepend=True)
h3 = blk.register_forward_hook(fwd_hook, with_kwargs=True, always_call=True)
x = torch.randn(4, 6)
blk.eval()
with_hook = blk(x, scale=0.5)
print("calls", calls)
for h in (h1, h2, h3):
    h.remove()
print("hooked equals doubled scale", torch.allclose(with_hook, blk(x, scale=1.0)), "hooks left",
      len(blk._forward_pre_hooks), len(blk._forward_hooks))

grads_seen = []
hb1 = net.head.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
hb2 = net.head.register_full_backward_hook(lambda m, gi, go: grads_seen.append((r(go[0].sum()), r(gi[0].sum()))))
glob = nn.modules.module.register_module_forward_hook(
    lambda m, i, o: grads_seen.append(type(m).__name__) if isinstance(m, nn.Linear) else None)
img, tokens = torch.randn(2, 3, 4, 4), torch.tensor([[1, 2, 0], [3, 0, 0]])
net.train()
out = net(img, tokens)
out.sum().backward()
glob.remove()
hb1.remove()
hb2.remove()
print("backward hooks", grads_seen)
print("head grad", r(net.head.weight.grad.sum()), "embedding pad grad", r(net.embed.weight.grad[0]))


# grad-mode decorators
@torch.no_grad()
def evaluate(model, x):
    return model(x), torch.is_grad_enabled()


@torch.enable_grad()
def inner_grad(x):
    return (x * 2).requires_grad, torch.is_grad_enabled()


@torch.inference_mode()
def infer(model, x):
    return model(x), torch.is_inference_mode_enabled()


lin = nn.Linear(6, 2)
o, g = evaluate(lin, x)
print("no_grad decorator", o.requires_grad, g, "is_grad_enabled after", torch.is_grad_enabled())
with torch.no_grad():
    print("enable_grad inside no_grad", inner_grad(torch.ones(2, requires_grad=True)))
o, inf = infer(lin, x)
print("inference decorator", o.requires_grad, o.is_inference(), inf)
with torch.set_grad_enabled(False):
    print("set_grad_enabled(False)", lin(x).requires_grad)
torch.set_grad_enabled(True)
with torch.inference_mode(mode=False):
    print("inference_mode(False)", lin(x).requires_grad, torch.is_inference_mode_enabled())

# activation checkpointing: same losses and gradients as the plain run, dropout included
class Deep(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.blocks = nn.ModuleList(Block(6) for _ in range(3))
        self.head = nn.Linear(6, 1)

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            if self.mode == "plain":
                x = blk(x, scale=0.5)
            else:
                x = checkpoint(blk, x, 0.5, use_reentrant=self.mode == "reentrant", preserve_rng_state=True)
        return self.head(x)


results = {}
xin = torch.randn(5, 6, requires_grad=True)
for mode in ("plain", "reentrant", "non-reentrant"):
    torch.manual_seed(3)
    model = Deep(mode)
    torch.manual_seed(7)
    out = model(xin)
    loss = out.pow(2).mean()
    loss.backward()
    results[mode] = (loss.item(), [p.grad.clone() for p in model.parameters()], xin.grad.clone())
    xin.grad = None
    grad_norm = sum(g.norm() ** 2 for g in results[mode][1]).sqrt().item()
    print(mode, "loss", round(loss.item(), 6), "grad norm", round(grad_norm, 6))
for mode in ("reentrant", "non-reentrant"):
    same = all(torch.allclose(a, b, atol=1e-6) for a, b in zip(results["plain"][1], results[mode][1]))
    print(mode, "matches plain", same, torch.allclose(results["plain"][2], results[mode][2], atol=1e-6))

seq = nn.Sequential(*[nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(4)])
x2 = torch.randn(3, 6, requires_grad=True)
plain = seq(x2).sum()
gp = torch.autograd.grad(plain, [x2] + list(seq.parameters()))
ck = checkpoint_sequential(seq, 2, x2, use_reentrant=False).sum()
gc = torch.autograd.grad(ck, [x2] + list(seq.parameters()))
print("checkpoint_sequential", round(ck.item(), 6), all(torch.allclose(a, b, atol=1e-6) for a, b in zip(gp, gc)))


def with_kwargs(a, b, *, power):
    return (a * b).pow(power).sum()


a = torch.randn(4, requires_grad=True)
val = checkpoint(with_kwargs, a, torch.ones(4), power=2, use_reentrant=False)
val.backward()
print("checkpoint kwargs", round(val.item(), 6), r(a.grad))

# an in-place activation after a Linear inside the checkpointed function (recomputed under hooks)
inner = nn.Sequential(nn.Linear(6, 6), nn.ReLU(inplace=True), nn.Linear(6, 1))
xi = torch.randn(4, 6, requires_grad=True)
checkpoint(inner, xi, use_reentrant=False).sum().backward()
print("inplace relu inside checkpoint", r(xi.grad.sum(0)), r(inner[0].weight.grad.sum()))

# per-sample gradients (functional_call + vmap(grad)) through the same in-place activation
params = {k: v.detach() for k, v in inner.named_parameters()}
per_sample = torch.func.vmap(torch.func.grad(lambda p, xs: torch.func.functional_call(inner, p, (xs,)).sum()),
                             in_dims=(None, 0))(params, xi.detach())
print("per-sample grads", {k: tuple(v.shape) for k, v in per_sample.items()}, r(per_sample["0.weight"].sum((1, 2))))
