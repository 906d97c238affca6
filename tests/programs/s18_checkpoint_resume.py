# Checkpointing mid-training as scripts do it: torch.save({'epoch', 'model_state_dict',
# 'optimizer_state_dict', 'scheduler', 'scaler', 'rng'}) to a BytesIO and to a file,
# torch.load(weights_only=True, map_location='cpu'), resuming into fresh objects must reproduce the
# uninterrupted run's losses exactly; strict=False reporting missing/unexpected keys; load_state_dict
# with assign=True; mmap loading; saving tensors that share storage (views) and a non-contiguous one.
import io
import os
import tempfile

import torch
import torch.nn as nn
from _seedfree import data, seed_free_init

X = data((40, 5), salt=11)
Y = (X.sum(1, keepdim=True) > 0).float()


def build():
    model = seed_free_init(nn.Sequential(nn.Linear(5, 12, bias=False), nn.BatchNorm1d(12), nn.ReLU(), nn.Dropout(0.0),
                                         nn.Linear(12, 1)), salt=12)
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    return model, opt, sched


def train(model, opt, sched, epochs, start=0):
    losses = []
    for epoch in range(start, start + epochs):
        for i in range(0, 40, 10):
            loss = nn.functional.binary_cross_entropy_with_logits(model(X[i:i + 10]), Y[i:i + 10])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(round(loss.item(), 6))
        sched.step()
    return losses


model, opt, sched = build()
straight = train(model, opt, sched, 6)
print('straight', straight)

model, opt, sched = build()
first = train(model, opt, sched, 3)
buf = io.BytesIO()
torch.save({'epoch': 3, 'model_state_dict': model.state_dict(), 'optimizer_state_dict': opt.state_dict(),
            'scheduler': sched.state_dict(), 'note': 'mid', 'shape': (1, 2), 'dtype': torch.float16}, buf)
buf.seek(0)
ckpt = torch.load(buf, weights_only=True, map_location='cpu')
print('ckpt keys', sorted(ckpt), ckpt['epoch'], ckpt['note'], ckpt['shape'], ckpt['dtype'])
print('opt state keys', sorted(ckpt['optimizer_state_dict']), sorted(ckpt['optimizer_state_dict']['state'][0]))
print('param_groups', {k: v for k, v in ckpt['optimizer_state_dict']['param_groups'][0].items()
                       if k in ('lr', 'betas', 'weight_decay', 'params', 'initial_lr', 'amsgrad')})
model2, opt2, sched2 = build()
model2.load_state_dict(ckpt['model_state_dict'])
opt2.load_state_dict(ckpt['optimizer_state_dict'])
sched2.load_state_dict(ckpt['scheduler'])
rest = train(model2, opt2, sched2, 3, start=ckpt['epoch'])
print('resumed equal', first + rest == straight, rest[-3:])
print('bn buffers', model2[1].num_batches_tracked.item(), f'{model2[1].running_mean.sum().item():.6f}')

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, 'ckpt.pt')
    torch.save(model2.state_dict(), path)
    sd = torch.load(path, weights_only=True, mmap=True)
    print('mmap', type(sd).__name__, list(sd)[:2], sd['1.num_batches_tracked'].dtype)
    model3, _, _ = build()
    result = model3.load_state_dict(sd)
    print('load result', result.missing_keys, result.unexpected_keys)
    print('same out', torch.equal(model3.eval()(X[:4]), model2.eval()(X[:4])))
    sd2 = dict(sd)
    sd2.pop('4.bias')
    sd2['extra.weight'] = torch.zeros(1)
    r = model3.load_state_dict(sd2, strict=False)
    print('strict False', r.missing_keys, r.unexpected_keys)
    try:
        model3.load_state_dict(sd2)
    except RuntimeError as e:
        print('strict error', str(e).splitlines()[0])
    with torch.device('meta'):
        meta_model = nn.Linear(5, 12, bias=False)
    meta_model.load_state_dict({'weight': sd['0.weight']}, assign=True)
    print('assign', meta_model.weight.device, meta_model.weight.requires_grad,
          torch.equal(meta_model.weight, sd['0.weight']))

base = torch.arange(12.0).view(3, 4)
buf = io.BytesIO()
torch.save({'base': base, 'view': base[1], 'tview': base.t(), 'slice': base[:, 1:3]}, buf)
buf.seek(0)
loaded = torch.load(buf, weights_only=True)
loaded['view'].fill_(-1)
print('shared storage', loaded['base'].tolist()[1], loaded['tview'].is_contiguous(), loaded['tview'].stride(),
      loaded['slice'].tolist(), loaded['slice'].storage_offset())
try:
    torch.load(io.BytesIO(b'not a checkpoint'), weights_only=True)
except Exception as e:  # noqa: BLE001
    print('garbage', type(e).__name__)
