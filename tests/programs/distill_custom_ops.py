# Knowledge distillation with custom operators: a teacher/student pair trained with the
# temperature-scaled KL term (F.kl_div on log_softmax / softmax, reduction="batchmean", times T^2)
# plus hard-label cross entropy; a torch.library.custom_op (mutates_args=()) with register_fake
# and register_autograd (setup_context saving an input) used inside the student; an
# autograd.Function with the setup_context form, a vmap staticmethod and generate_vmap_rule run
# under torch.func.vmap / grad; once_differentiable; KLDivLoss(log_target=True).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable


@torch.library.custom_op("emberprog::scaled_softsign", mutates_args=())
def scaled_softsign(x: torch.Tensor, scale: float) -> torch.Tensor:
    return scale * x / (1 + x.abs())


@scaled_softsign.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x)
    ctx.scale = scale


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * ctx.scale / (1 + x.abs()) ** 2, None


scaled_softsign.register_autograd(_backward, setup_context=_setup)


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x**3, x

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad, _unused):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad

    @staticmethod
    def vmap(info, in_dims, x):
        out = x**3
        return (out, x), (in_dims[0], in_dims[0])


class ClampedExp(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, limit):
        return x.clamp(max=limit).exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, limit = inputs
        ctx.save_for_backward(output, x)
        ctx.limit = limit

    @staticmethod
    def backward(ctx, grad):
        out, x = ctx.saved_tensors
        return grad * out * (x <= ctx.limit), None


class LeakyStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.where(x.abs() < 1, torch.ones_like(x), torch.full_like(x, 0.1))


torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
out = scaled_softsign(x, 2.0)
out.sum().backward()
print("custom op", [round(v, 5) for v in out.tolist()], [round(v, 5) for v in x.grad.tolist()])
print("custom op via ops", torch.allclose(torch.ops.emberprog.scaled_softsign(x, 2.0), out))
print(
    "gradcheck custom op",
    torch.autograd.gradcheck(
        lambda t: scaled_softsign(t, 1.5), (torch.randn(4, dtype=torch.double, requires_grad=True),)
    ),
)
print("opcheck", sorted(torch.library.opcheck(scaled_softsign, (torch.randn(3), 0.5)).items()))

c, ident = Cube.apply(x)
print("cube", ident.requires_grad, [round(v, 4) for v in torch.autograd.grad(c.sum(), x)[0].tolist()])
batched, same = torch.func.vmap(Cube.apply)(torch.arange(6.0).view(2, 3))
print("cube vmap", batched.tolist(), same.tolist())
g = torch.func.vmap(torch.func.grad(lambda t: Cube.apply(t)[0].sum()))(torch.arange(6.0).view(2, 3))
print("cube vmap grad", g.tolist())
e = torch.func.vmap(ClampedExp.apply, in_dims=(0, None))(torch.linspace(-1, 2, 6).view(2, 3), 1.0)
print("clamped exp vmap", [[round(v, 5) for v in row] for row in e.tolist()])
pg = torch.func.vmap(torch.func.grad(lambda t: ClampedExp.apply(t, 0.5).sum()))(torch.linspace(-1, 2, 6).view(2, 3))
print("clamped exp per-sample grad", [[round(v, 5) for v in row] for row in pg.tolist()])
s = LeakyStep.apply(x)
s.sum().backward()
print("leaky step", s.tolist(), [round(v, 4) for v in x.grad.tolist()])
xx = torch.randn(3, requires_grad=True)
(gg,) = torch.autograd.grad(LeakyStep.apply(xx * 2).sum(), xx, create_graph=True)
try:
    gg.sum().backward()
except RuntimeError as err:
    print("once_differentiable double backward:", str(err).split("\n")[0][:90])


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(scaled_softsign(self.fc1(x), 1.5))


data = torch.randn(64, 10)
labels = (data[:, :4].argmax(1) + (data[:, 4] > 1).long()) % 4
teacher = Teacher()
topt = torch.optim.SGD(teacher.parameters(), lr=0.2, momentum=0.9)
for epoch in range(15):
    topt.zero_grad()
    tl = F.cross_entropy(teacher(data), labels)
    tl.backward()
    topt.step()
print(f"teacher loss {tl.item():.5f}")
teacher.eval()
with torch.no_grad():
    soft = teacher(data)
student = Student()
sopt = torch.optim.Adam(student.parameters(), lr=0.02)
T, alpha = 3.0, 0.7
for epoch in range(8):
    for i in range(0, 64, 16):
        xb, yb, tb = data[i : i + 16], labels[i : i + 16], soft[i : i + 16]
        sopt.zero_grad()
        logits = student(xb)
        kd = F.kl_div(F.log_softmax(logits / T, dim=1), F.softmax(tb / T, dim=1), reduction="batchmean") * T * T
        loss = alpha * kd + (1 - alpha) * F.cross_entropy(logits, yb)
        loss.backward()
        sopt.step()
    print(f"student epoch {epoch} kd {kd.item():.5f} loss {loss.item():.5f}")
with torch.no_grad():
    acc_s = (student(data).argmax(1) == labels).float().mean().item()
    acc_t = (soft.argmax(1) == labels).float().mean().item()
    agree = (student(data).argmax(1) == soft.argmax(1)).float().mean().item()
print(f"accuracy teacher {acc_t:.4f} student {acc_s:.4f} agreement {agree:.4f}")
crit = nn.KLDivLoss(reduction="batchmean", log_target=True)
a, b = F.log_softmax(torch.randn(3, 4), 1), F.log_softmax(torch.randn(3, 4), 1)
print(
    "kldiv log_target",
    round(crit(a, b).item(), 6),
    round(F.kl_div(a, b.exp(), reduction="sum").item(), 6),
    round(F.kl_div(a, b.exp(), reduction="mean").item(), 6),
)
print("kldiv none", [[round(v, 5) for v in r] for r in F.kl_div(a, b, reduction="none", log_target=True).tolist()])
