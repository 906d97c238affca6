# Hinton's forward-forward algorithm as pytorch/examples' mnist_forward_forward writes it, from memory: labels
# overlaid on the first pixels (x.max()), positive and negative data, layers normalised by their L2 norm
# (x / (x.norm(2, 1, keepdim=True) + 1e-4)), each layer trained alone with its own Adam on
# log(1 + exp(cat([-g_pos + threshold, g_neg - threshold]))).mean(), detach() between layers, and prediction
# by the label with the highest summed goodness (argmax of a stacked goodness table).
import torch
import torch.nn as nn
from _seedfree import data, integers, seed_free_init
from torch.optim import Adam


def overlay_y_on_x(x, y, classes=4):
    x_ = x.clone()
    x_[:, :classes] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Layer(nn.Linear):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)
        self.relu = torch.nn.ReLU()
        self.opt = None
        self.threshold = 2.0
        self.num_epochs = 6

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train_layer(self, x_pos, x_neg, name):
        if self.opt is None:
            self.opt = Adam(self.parameters(), lr=0.03)
        for i in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log(1 + torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if i % 2 == 0:
                print(f"{name} epoch {i} loss {loss.item():.6f}")
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


class Net(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = nn.ModuleList(Layer(dims[d], dims[d + 1]) for d in range(len(dims) - 1))

    def predict(self, x):
        goodness_per_label = []
        for label in range(4):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness += [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train_net(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            h_pos, h_neg = layer.train_layer(h_pos, h_neg, f"layer {i}")


x = data((32, 20), salt=251, low=0.0, high=1.0)
y = integers((32,), 4, salt=252)
net = seed_free_init(Net([20, 16, 16]), salt=253)
x_pos = overlay_y_on_x(x, y)
y_neg = (y + integers((32,), 3, salt=254) + 1) % 4
x_neg = overlay_y_on_x(x, y_neg)
print("overlay", x_pos[:2, :5].tolist(), bool((y_neg != y).all()))
net.train_net(x_pos, x_neg)
pred = net.predict(x)
print("train error", 1.0 - pred.eq(y).float().mean().item(), pred[:10].tolist())
print(net)
