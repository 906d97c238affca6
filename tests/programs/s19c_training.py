# Compiling a training loop: the model compiled, the step (forward, backward, optimizer step) compiled,
# losses equal to the eager loop's.
import torch
import torch.nn as nn
from _seedfree import data, integers, seed_free_init


def make():
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.0), nn.Linear(12, 3))
    return seed_free_init(model, 3)


x, y = data((16, 6), 1), integers((16,), 3, 2)
loss_fn = nn.CrossEntropyLoss()


def train(model, opt, step_fn, steps=5):
    losses = []
    for _ in range(steps):
        losses.append(round(step_fn(model, opt), 5))
    return losses


def step(model, opt):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


eager_model = make()
print("eager", train(eager_model, torch.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9), step))
compiled_model = make()
opt = torch.optim.SGD(compiled_model.parameters(), lr=0.1, momentum=0.9)
cm = torch.compile(compiled_model)


def step_compiled_model(model, opt):
    opt.zero_grad()
    loss = loss_fn(cm(x), y)
    loss.backward()
    opt.step()
    return loss.item()


print("compiled model", train(compiled_model, opt, step_compiled_model))
m3 = make()
opt3 = torch.optim.Adam(m3.parameters(), lr=0.01)


@torch.compile
def whole_step(inp, target):
    opt3.zero_grad(set_to_none=True)
    loss = loss_fn(m3(inp), target)
    loss.backward()
    opt3.step()
    return loss


m4 = make()
opt4 = torch.optim.Adam(m4.parameters(), lr=0.01)
print("eager adam", train(m4, opt4, step))
print("compiled step", [round(whole_step(x, y).item(), 5) for _ in range(5)])
print("weights agree", all(torch.allclose(p, q, atol=1e-5) for p, q in zip(m3.parameters(), m4.parameters())))
sched = torch.optim.lr_scheduler.StepLR(opt3, 2, gamma=0.5)
for _ in range(3):
    whole_step(x, y)
    sched.step()
print("lr", opt3.param_groups[0]["lr"])
