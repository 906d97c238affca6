# The char-RNN name classification tutorial, from memory: letters to one-hot tensors, a hand-written
# RNN cell (i2h/h2o over concatenated input and hidden) with LogSoftmax, NLLLoss, a manual SGD
# update (p.data.add_(p.grad.data, alpha=-lr)), category_from_output with topk, and an nn.RNN variant.
import string

import torch
import torch.nn as nn

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)
data = {"English": ["Smith", "Jones", "Taylor", "Brown"], "French": ["Dubois", "Lefevre", "Moreau", "Girard"],
        "Italian": ["Rossi", "Russo", "Ferrari", "Esposito"]}
all_categories = list(data)


def letterToIndex(letter):
    return all_letters.find(letter)


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.softmax(self.h2o(combined))
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


torch.manual_seed(0)
rnn = RNN(n_letters, 32, len(all_categories))
criterion = nn.NLLLoss()
learning_rate = 0.005
pairs = [(c, n) for c in all_categories for n in data[c]]
for it in range(24):
    category, line = pairs[int(torch.randint(len(pairs), (1,)))]
    category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
    line_tensor = lineToTensor(line)
    hidden = rnn.initHidden()
    rnn.zero_grad()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)
    if it % 4 == 0:
        guess, _ = categoryFromOutput(output)
        print(it, line, category, guess, "%.5f" % loss.item())
confusion = torch.zeros(len(all_categories), len(all_categories))
with torch.no_grad():
    for category, line in pairs:
        hidden = rnn.initHidden()
        t = lineToTensor(line)
        for i in range(t.size(0)):
            output, hidden = rnn(t[i], hidden)
        confusion[all_categories.index(category)][categoryFromOutput(output)[1]] += 1
print("confusion", (confusion / confusion.sum(1, keepdim=True)).numpy().round(4).tolist())
packed_rnn = nn.RNN(n_letters, 16, batch_first=False)
seqs = [lineToTensor(n).squeeze(1) for n in ["Ann", "Bo", "Carla"]]
packed = nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
out, h = packed_rnn(packed)
unpacked, lengths = nn.utils.rnn.pad_packed_sequence(out)
print("packed", tuple(unpacked.shape), lengths.tolist(), round(h.sum().item(), 5))
