# torch.autocast on CPU with bfloat16, as the AMP recipes write it: which ops run in bf16 (linear,
# conv, matmul, bmm) and which stay float32 (softmax, log_softmax, layer_norm, losses), nesting
# autocast(enabled=False), the decorator form, is_autocast_enabled / get_autocast_dtype, the
# custom_fwd/custom_bwd pair, and a short training loop whose losses are printed to bf16 precision.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init

model = seed_free_init(nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                     nn.Linear(8 * 12, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 5)), salt=4)
x = data((6, 4, 12), salt=8)
y = integers((6,), 5, salt=8)
with torch.autocast(device_type='cpu', dtype=torch.bfloat16):
    h = model[0](x)
    print('conv', h.dtype, torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu'))
    h = model[3](model[2](model[1](h)))
    print('linear', h.dtype)
    ln = model[4](h)
    print('layer_norm', ln.dtype)
    logits = model[6](model[5](ln))
    print('logits', logits.dtype, 'softmax', torch.softmax(logits, -1).dtype,
          'log_softmax', F.log_softmax(logits, -1).dtype)
    loss = F.cross_entropy(logits, y)
    print('loss', loss.dtype, 'mse', F.mse_loss(logits, logits.detach() * 0).dtype)
    a, b = x[:, :, :4], x[:, :, :4].transpose(1, 2)
    print('bmm', torch.bmm(a, b).dtype, 'matmul', (a @ b).dtype, 'addmm',
          torch.addmm(x[0, 0, :4], x[0, :, :4].t(), x[0, :, :4]).dtype)
    print('add', (a + 1).dtype, 'sum', logits.sum().dtype, 'exp', logits.exp().dtype)
    with torch.autocast(device_type='cpu', enabled=False):
        print('disabled', model[3](model[2](model[1](model[0](x)))).dtype, torch.is_autocast_enabled('cpu'))
print('outside', torch.is_autocast_enabled('cpu'), model(x).dtype)


@torch.autocast(device_type='cpu', dtype=torch.bfloat16)
def decorated(t):
    return model(t)


print('decorated', decorated(x).dtype)


class MyMM(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type='cpu', cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type='cpu')
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


m1 = data((3, 4), salt=1).requires_grad_()
m2 = data((4, 2), salt=2).requires_grad_()
with torch.autocast(device_type='cpu', dtype=torch.bfloat16):
    out = MyMM.apply(m1, m2)
    print('custom_fwd', out.dtype, (m1 @ m2).dtype)
out.sum().backward()
print('custom_bwd', m1.grad.dtype, [round(v, 5) for v in m1.grad[0].tolist()])

opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(5):
    with torch.autocast(device_type='cpu', dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f'step {step} loss {loss.item():.2f}', loss.dtype, model[0].weight.grad.dtype)
