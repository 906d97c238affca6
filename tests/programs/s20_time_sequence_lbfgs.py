# pytorch/examples' time_sequence_prediction, from memory: sine waves as double-precision input, a Sequence
# model of two LSTMCells stepped by hand (h_t, c_t zero-initialised with dtype=torch.double), future
# prediction by feeding outputs back, model.double(), optim.LBFGS(lr=0.8) with a closure that prints the
# loss, and a test pass under no_grad. Also LBFGS with line_search_fn='strong_wolfe', state_dict
# round-trip, and a second parameter group rejected.
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from _seedfree import seed_free_init

np.random.seed(2)
T, L, N = 20, 40, 12
x = np.empty((N, L), np.int64)
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
wave = np.sin(x / 1.0 / T).astype("float64")


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 12)
        self.lstm2 = nn.LSTMCell(12, 12)
        self.linear = nn.Linear(12, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 12, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 12, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


data = torch.from_numpy(wave)
input = data[3:, :-1]
target = data[3:, 1:]
test_input = data[:3, :-1]
test_target = data[:3, 1:]
for line_search in (None, "strong_wolfe"):
    seq = seed_free_init(Sequence(), salt=271)
    seq.double()
    print(seq.linear.weight.dtype, next(seq.parameters()).dtype)
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8 if line_search is None else 1, max_iter=6,
                            line_search_fn=line_search)
    for i in range(3):
        print("STEP: ", i)
        calls = []

        def closure(optimizer=optimizer, seq=seq, criterion=criterion, calls=calls):
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            calls.append(round(loss.item(), 10))
            loss.backward()
            return loss
        ret = optimizer.step(closure)
        print("loss:", [f"{c:.8f}" for c in calls[:4]], len(calls), f"{ret.item():.8f}")
        with torch.no_grad():
            future = 5
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print("test loss:", f"{loss.item():.8f}", tuple(pred.shape), pred.dtype)
            y = pred.detach().numpy()
        print("pred tail", np.round(y[0, -3:], 5).tolist())
    state = optimizer.state_dict()
    s0 = state["state"][0]
    print(sorted(state["param_groups"][0]), sorted(s0), s0["func_evals"], s0["n_iter"], len(s0["old_dirs"]))
    fresh = optim.LBFGS(seq.parameters())
    fresh.load_state_dict(state)
    print(fresh.param_groups[0]["line_search_fn"], fresh.state[next(seq.parameters())]["n_iter"])
try:
    optim.LBFGS([{"params": [torch.zeros(1, requires_grad=True)]}, {"params": [torch.ones(1, requires_grad=True)]}])
except ValueError as e:
    print("ValueError", e)
