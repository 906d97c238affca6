# Compiling nn.Module methods and functions closing over modules: torch.compile(model.forward), a decorated
# method, a helper method compiled alone, a closure over two modules, model.compile(), the
# OptimizedModule's state_dict keys (_orig_mod.), attribute forwarding, and train/eval switching.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
        self.head = nn.Linear(8, 3)
        self.drop = nn.Dropout(0.5)
        self.temperature = 2.0

    def forward(self, x):
        return self.head(self.drop(self.enc(x))) / self.temperature

    def embed(self, x):
        return self.enc(x).mean(0)

    @torch.compile(backend="eager")
    def scores(self, x):
        return self.head(self.enc(x)).softmax(-1)


net = seed_free_init(Net(), 1).eval()
x = data((5, 6), 2)
ref = net(x)
print("forward method", torch.allclose(torch.compile(net.forward)(x), ref, atol=1e-6))
print("helper method", torch.allclose(torch.compile(net.embed)(x), net.embed(x), atol=1e-6))
print("decorated method", torch.allclose(net.scores(x), net.head(net.enc(x)).softmax(-1), atol=1e-6))
other = seed_free_init(Net(), 2).eval()
print("decorated other instance", torch.allclose(other.scores(x), other.head(other.enc(x)).softmax(-1), atol=1e-6))

enc, head = net.enc, net.head


def pipeline(inp):
    return head(enc(inp)).argmax(-1)


cp = torch.compile(pipeline)
print("closure", cp(x).tolist() == pipeline(x).tolist())
with torch.no_grad():
    head.bias.add_(torch.tensor([5.0, 0.0, 0.0]))
print("closure sees new weights", cp(x).tolist(), pipeline(x).tolist() == cp(x).tolist())

opt = torch.compile(net)
print("wrapper", type(opt).__name__, isinstance(opt, nn.Module), opt._orig_mod is net)
print("state keys", list(opt.state_dict())[:2])
print("attribute", opt.temperature, opt.head.out_features)
net.temperature = 4.0
print("attribute change", torch.allclose(opt(x), net(x), atol=1e-6))
opt.train()
print("train flag", net.training, opt.training)
torch.manual_seed(0)
a = opt(x)
torch.manual_seed(0)
b = net(x)
print("train mode dropout differs from eval", not torch.allclose(a, ref), a.shape)
opt.eval()
print("eval again", torch.allclose(opt(x), net(x), atol=1e-6))
m2 = seed_free_init(Net(), 1).eval()
m2.compile(backend="eager")
print("module.compile", type(m2).__name__, torch.allclose(m2(x), net(x) * 2, atol=1e-6))
print("module.compile keys", list(m2.state_dict())[:2])
loaded = seed_free_init(Net(), 5)
loaded.load_state_dict({k.replace("_orig_mod.", ""): v for k, v in opt.state_dict().items()})
print("load from compiled", torch.allclose(loaded.eval()(x), net(x), atol=1e-6))
