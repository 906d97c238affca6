# What training scripts print: tensor reprs (float/int/bool/complex/half/bfloat16, 0-d, empty,
# requires_grad and grad_fn names, nan/inf, scientific notation picked by range, summarised large
# tensors with edgeitems), torch.set_printoptions (precision, sci_mode, linewidth, threshold,
# profile) restored afterwards, Parameter reprs, str of Size/dtype/device, module reprs with
# custom extra_repr, ModuleDict/ParameterList/ParameterDict, and optimizer and scheduler reprs.
import torch
import torch.nn as nn

print(torch.tensor([1.0, 2.5, -3.25]))
print(torch.tensor([[1, 2], [3, 4]]), torch.tensor([True, False]))
print(torch.tensor(3.5), torch.tensor(7), torch.tensor([], dtype=torch.float32), torch.zeros(2, 0))
print(torch.tensor([1e-8, 1.0, 1e8]), torch.tensor([0.001, 0.01]), torch.tensor([123456.0, 1.5]))
print(torch.tensor([float('nan'), float('inf'), -float('inf'), 1.0]))
print(torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([1.5, 2.25], dtype=torch.float16))
print(torch.tensor([1.5, -2.0], dtype=torch.bfloat16), torch.tensor([1, 2], dtype=torch.int32))
print(torch.tensor([1 + 2j, -0.5j]), torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3], dtype=torch.int8))
x = torch.linspace(0, 1, 5, requires_grad=True)
y = (x * 2).sum()
print(x, y, x.mean(), x[1:3], x.exp().max(), x.view(5, 1).t())
print(torch.arange(2000).float())
print(torch.arange(120).reshape(2, 3, 20))
print(torch.full((3, 4), 1 / 3).double())
torch.set_printoptions(precision=2, sci_mode=False, linewidth=40)
print(torch.tensor([1e-5, 3.14159, 12345.678]), torch.arange(30.0) / 7)
torch.set_printoptions(threshold=5, edgeitems=1)
print(torch.arange(10), torch.eye(4))
torch.set_printoptions(profile='default')
torch.set_printoptions(sci_mode=True)
print(torch.tensor([1.0, 2.0]))
torch.set_printoptions(profile='default')
print(torch.tensor([1.0, 2.0]), torch.tensor([[0.1234567, 100.0]]))
p = nn.Parameter(torch.ones(2))
print(p, nn.Parameter(torch.zeros(1), requires_grad=False), torch.Size([2, 3]), torch.float32, torch.device('cpu'))


class Gate(nn.Module):
    def __init__(self, dim, temp=0.5):
        super().__init__()
        self.dim, self.temp = dim, temp
        self.w = nn.Parameter(torch.zeros(dim))

    def extra_repr(self):
        return f'dim={self.dim}, temp={self.temp}'


model = nn.Sequential(nn.Conv1d(2, 4, 3, padding='same', dilation=2, padding_mode='circular'), Gate(4),
                      nn.ModuleDict({'a': nn.GRU(4, 4, 2, dropout=0.1), 'b': nn.Identity()}),
                      nn.Hardtanh(-2, 2), nn.Softmax(dim=-1), nn.Bilinear(3, 4, 5), nn.Unflatten(1, (2, 2)),
                      nn.Embedding(7, 3, padding_idx=1, max_norm=2.0), nn.Flatten(0, -1), nn.Threshold(0.1, 20))
print(model)
plist = nn.ParameterList([nn.Parameter(torch.ones(2, 3)), nn.Parameter(torch.zeros(4))])
pdict = nn.ParameterDict({'scale': nn.Parameter(torch.ones(1)),
                          'shift': nn.Parameter(torch.zeros(3, dtype=torch.float64))})
print(plist)
print(pdict)
opt = torch.optim.Adam([{'params': model[0].parameters()}, {'params': model[1].parameters(), 'lr': 0.1}],
                       lr=1e-3, weight_decay=0.01)
print(opt)
sched = torch.optim.lr_scheduler.StepLR(opt, 3)
print(type(sched).__name__, sched.get_last_lr(), sched.last_epoch, opt.param_groups[1]['initial_lr'])
