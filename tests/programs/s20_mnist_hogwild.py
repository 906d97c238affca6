# pytorch/examples' mnist_hogwild, from memory: the model's parameters moved to shared memory with
# share_memory(), several torch.multiprocessing processes (the default start method, fork, as the example on
# a CPU: spawn would re-import this file with the real torch under the test driver) training the same parameters
# asynchronously with their own optimizers and DataLoaders, then a test pass. The asynchronous losses are
# order-dependent, so workers here train on disjoint parameter subsets' gradients only through a Queue report;
# what is compared: shared storage (is_shared, data_ptr stable), that workers' in-place updates reach the
# parent, the per-worker losses of a deterministic schedule (workers run one after another), and the test.
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from _seedfree import data, seed_free_init
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
        self.conv2 = nn.Conv2d(4, 6, kernel_size=3)
        self.conv2_drop = nn.Dropout2d(p=0.0)
        self.fc1 = nn.Linear(6, 10)
        self.fc2 = nn.Linear(10, 3)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 6)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training, p=0.0)
        return F.log_softmax(self.fc2(x), dim=1)


def make_data():
    x = data((24, 1, 10, 10), salt=241)
    y = (x.mean(dim=(1, 2, 3)) * 40).long().clamp(-1, 1) + 1
    return TensorDataset(x, y)


def train(rank, model, queue, lock):
    torch.manual_seed(1 + rank)
    loader = DataLoader(make_data(), batch_size=8, shuffle=False, num_workers=0)
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    model.train()
    losses = []
    for epoch in range(2):
        for batch_idx, (x, y) in enumerate(loader):
            with lock:
                optimizer.zero_grad()
                loss = F.nll_loss(model(x), y)
                loss.backward()
                optimizer.step()
            losses.append(round(loss.item(), 6))
    queue.put((rank, losses, torch.get_num_threads() >= 1))


def test(model):
    model.eval()
    test_loss, correct = 0, 0
    loader = DataLoader(make_data(), batch_size=12)
    with torch.no_grad():
        for x, y in loader:
            output = model(x)
            test_loss += F.nll_loss(output, y, reduction="sum").item()
            pred = output.max(1)[1]
            correct += pred.eq(y.view_as(pred)).sum().item()
    test_loss /= len(loader.dataset)
    print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(loader.dataset)} "
          f"({100. * correct / len(loader.dataset):.0f}%)")


if __name__ == "__main__":
    model = seed_free_init(Net(), salt=240)
    model.share_memory()
    print("shared", all(p.is_shared() for p in model.parameters()), model.fc1.weight.is_shared())
    ptr = model.fc2.bias.data_ptr()
    before = model.fc2.bias.detach().clone()
    queue, lock = mp.Queue(), mp.Lock()
    for rank in range(2):  # one after another: the same schedule in both libraries
        p = mp.Process(target=train, args=(rank, model, queue, lock))
        p.start()
        p.join()
        print("worker", rank, "exitcode", p.exitcode)
        r, losses, ok = queue.get(timeout=60)
        print("rank", r, losses, ok)
    print("updated in parent", not torch.equal(before, model.fc2.bias), model.fc2.bias.data_ptr() == ptr)
    test(model)
    t = torch.zeros(3)
    t.share_memory_()
    print(t.is_shared(), t.share_memory_() is t, t.clone().is_shared(), mp.cpu_count() >= 1)
