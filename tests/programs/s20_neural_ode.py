# A neural ODE as torchdiffeq's examples/ode_demo.py writes it, from memory, with a hand-written fixed-step RK4
# (and Euler, midpoint) odeint instead of the package: the true dynamics dy/dt = y**3 @ A integrated with
# torch.no_grad(), ODEFunc(nn.Module) with Tanh and nn.init.normal_(std=0.1)-style weights, get_batch drawing
# time windows, odeint over a time grid stacking states, RMSprop, a RunningAverageMeter, and the adjoint-free
# backward through the whole unrolled solver. Also a continuous normalising flow's Hutchinson trace estimator
# (autograd.grad with create_graph=True) and the exact trace by one grad per dimension.
import torch
import torch.nn as nn
import torch.optim as optim
from _seedfree import data, seed_free_init

true_y0 = torch.tensor([[2.0, 0.0]])
t = torch.linspace(0.0, 2.5, 40)
true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])


def rk4_step(func, t0, dt, y):
    k1 = func(t0, y)
    k2 = func(t0 + dt / 2, y + dt * k1 / 2)
    k3 = func(t0 + dt / 2, y + dt * k2 / 2)
    k4 = func(t0 + dt, y + dt * k3)
    return y + dt * (k1 + 2 * k2 + 2 * k3 + k4) / 6


def odeint(func, y0, t, method="rk4"):
    ys = [y0]
    y = y0
    for t0, t1 in zip(t[:-1], t[1:]):
        dt = t1 - t0
        if method == "rk4":
            y = rk4_step(func, t0, dt, y)
        elif method == "midpoint":
            y = y + dt * func(t0 + dt / 2, y + dt / 2 * func(t0, y))
        else:
            y = y + dt * func(t0, y)
        ys.append(y)
    return torch.stack(ys)


class Lambda(nn.Module):
    def forward(self, t, y):
        return torch.mm(y ** 3, true_A)


with torch.no_grad():
    true_y = odeint(Lambda(), true_y0, t, method="rk4")
print("true_y", tuple(true_y.shape), [round(v, 5) for v in true_y[-1, 0].tolist()])
for m in ("euler", "midpoint"):
    with torch.no_grad():
        print(m, [round(v, 5) for v in odeint(Lambda(), true_y0, t, method=m)[-1, 0].tolist()])


def get_batch(itr, batch_time=6, batch_size=8):
    s = ((torch.arange(batch_size) * 7 + itr * 3) % (40 - batch_time)).long()
    batch_y0 = true_y[s]
    batch_t = t[:batch_time]
    batch_y = torch.stack([true_y[s + i] for i in range(batch_time)], dim=0)
    return batch_y0, batch_t, batch_y


class ODEFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
        for m in self.net.modules():
            if isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, val=0)
        self.nfe = 0

    def forward(self, t, y):
        self.nfe += 1
        return self.net(y ** 3)


class RunningAverageMeter:
    def __init__(self, momentum=0.99):
        self.momentum = momentum
        self.val, self.avg = None, 0

    def update(self, val):
        self.avg = val if self.val is None else self.avg * self.momentum + val * (1 - self.momentum)
        self.val = val


func = seed_free_init(ODEFunc(), salt=301)
optimizer = optim.RMSprop(func.parameters(), lr=1e-3)
loss_meter = RunningAverageMeter(0.97)
for itr in range(1, 7):
    optimizer.zero_grad()
    batch_y0, batch_t, batch_y = get_batch(itr)
    pred_y = odeint(func, batch_y0, batch_t)
    loss = torch.mean(torch.abs(pred_y - batch_y))
    loss.backward()
    optimizer.step()
    loss_meter.update(loss.item())
    if itr % 2 == 0:
        with torch.no_grad():
            pred_y = odeint(func, true_y0, t)
            loss = torch.mean(torch.abs(pred_y - true_y))
            print(f"Iter {itr:04d} | Total Loss {loss.item():.6f} | running {loss_meter.avg:.6f} | nfe {func.nfe}")


class CNF(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(3, 12), nn.Softplus(), nn.Linear(12, 2))

    def forward(self, t, state, eps=None):
        z = state[:, :2]
        with torch.enable_grad():
            z = z.requires_grad_(True) if not z.requires_grad else z
            dz = self.f(torch.cat([z, t.expand(z.shape[0], 1)], dim=1))
            if eps is None:
                trace = sum(torch.autograd.grad(dz[:, i].sum(), z, create_graph=True)[0][:, i] for i in range(2))
            else:
                vjp = torch.autograd.grad(dz, z, eps, create_graph=True)[0]
                trace = (vjp * eps).sum(dim=1)
        return torch.cat([dz, -trace.unsqueeze(1)], dim=1)


cnf = seed_free_init(CNF(), salt=302)
z0 = data((16, 2), salt=303)
eps = torch.from_numpy(((data((16, 2), salt=304).numpy() > 0) * 2 - 1).astype("float32"))
opt = optim.Adam(cnf.parameters(), lr=1e-2)
for it in range(4):
    state0 = torch.cat([z0, torch.zeros(16, 1)], dim=1)
    exact = odeint(lambda tt, s: cnf(tt, s), state0, torch.linspace(0, 1, 5))[-1]
    hutch = odeint(lambda tt, s: cnf(tt, s, eps), state0, torch.linspace(0, 1, 5))[-1]
    z1, delta_logp = exact[:, :2], exact[:, 2]
    logp_z1 = -0.5 * (z1 ** 2).sum(1) - torch.log(torch.tensor(2 * torch.pi))
    loss = -(logp_z1 - delta_logp).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"cnf {it} nll {loss.item():.6f} hutchinson dlogp {hutch[:, 2].mean().item():.6f} "
          f"exact {delta_logp.mean().item():.6f}")
