# Module and tensor hooks, state_dict surgery (renaming keys, dropping a head, strict=False
# reports, assign=True, prefix stripping from DataParallel-style checkpoints), and a whole
# training checkpoint (model, optimizer, scheduler, RNG state, epoch) saved and resumed.
import collections
import io

import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(collections.OrderedDict([
    ("body", nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8))),
    ("head", nn.Linear(8, 3)),
]))
log = []
h1 = net.body.register_forward_pre_hook(lambda m, args: log.append(("pre", tuple(args[0].shape))))
h2 = net.head.register_forward_hook(lambda m, args, out: out * 2)
h3 = net.body[0].register_full_backward_hook(
    lambda m, gin, gout: log.append(("bwd", [None if g is None else round(g.abs().sum().item(), 4) for g in gin])))
h4 = net.register_forward_hook(lambda m, args, kwargs, out: log.append(("kw", sorted(kwargs))), with_kwargs=True)
acts = {}
net.body[1].register_forward_hook(lambda m, i, o: acts.__setitem__("relu", o.detach()))
x = torch.randn(5, 4, requires_grad=True)
out = net(x)
x.register_hook(lambda g: log.append(("xgrad", round(g.sum().item(), 4))))
out.sum().backward()
print(log)
print("activation", acts["relu"].shape == (5, 8), round(acts["relu"].sum().item(), 4))
for h in (h1, h2, h3, h4):
    h.remove()
print("removed", net(x).sum().item() == (out.sum() / 2).item() or round(net(x).sum().item(), 4))

sd = net.state_dict()
print(list(sd.keys()))
print("bn buffers", sd["body.2.num_batches_tracked"].item(), sd["body.2.running_mean"].dtype)
wrapped = {"module." + k: v for k, v in sd.items()}
stripped = collections.OrderedDict((k[len("module."):] if k.startswith("module.") else k, v)
                                   for k, v in wrapped.items())
torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(wrapped, "module.")
print("prefix removed", list(wrapped) == list(stripped))
new = nn.Sequential(collections.OrderedDict([
    ("body", nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8))),
    ("head", nn.Linear(8, 5)),
]))
no_head = {k: v for k, v in sd.items() if not k.startswith("head.")}
result = new.load_state_dict(no_head, strict=False)
print("missing", result.missing_keys, "unexpected", result.unexpected_keys)
try:
    new.load_state_dict(sd)
except RuntimeError as e:
    print("RuntimeError", str(e).splitlines()[0])
    print("size mismatch mentioned", "size mismatch for head.weight" in str(e))
extra = dict(no_head, **{"body.9.weight": torch.zeros(1)})
try:
    new.load_state_dict(extra)
except RuntimeError as e:
    print("unexpected/missing reported", "Unexpected key(s)" in str(e), "Missing key(s)" in str(e))
fresh = torch.zeros(8, 4)
new.body[0].load_state_dict({"weight": fresh, "bias": torch.zeros(8)}, assign=True)
print("assign keeps object", new.body[0].weight.data_ptr() == fresh.data_ptr(),
      type(new.body[0].weight).__name__)

opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 3], gamma=0.5)
data = torch.randn(6, 4)
target = torch.randint(0, 3, (6,))


def step():
    opt.zero_grad()
    loss = nn.functional.cross_entropy(net(data + 0.01 * torch.randn_like(data)), target)
    loss.backward()
    opt.step()
    sched.step()
    return loss.item()


for epoch in range(2):
    step()
buf = io.BytesIO()
torch.save({"epoch": 2, "model": net.state_dict(), "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(), "rng": torch.get_rng_state()}, buf)
uninterrupted = [step() for _ in range(3)]
buf.seek(0)
ckpt = torch.load(buf, weights_only=True)
print("ckpt keys", sorted(ckpt), ckpt["epoch"], sorted(ckpt["optimizer"]), ckpt["scheduler"]["last_epoch"])
net.load_state_dict(ckpt["model"])
opt.load_state_dict(ckpt["optimizer"])
sched.load_state_dict(ckpt["scheduler"])
torch.set_rng_state(ckpt["rng"])
resumed = [step() for _ in range(3)]
print("resume matches", uninterrupted == resumed, [round(v, 6) for v in resumed], sched.get_last_lr())
print("momentum buffer", sorted(opt.state_dict()["state"][0]))
