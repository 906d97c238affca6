# torch.nn.utils.rnn end to end: pack_sequence(enforce_sorted=False) of ragged sequences, the
# PackedSequence fields (data, batch_sizes, sorted_indices, unsorted_indices), a 2-layer
# bidirectional LSTM and a GRU with an initial state over packed input, pad_packed_sequence with
# total_length and batch_first both ways, unpack_sequence / unpad_sequence round trips,
# pad_sequence(padding_side='left'), the last valid output per sequence by gather, and a classifier
# trained on the concatenated final hidden states with Adam.
import torch
import torch.nn as nn
from _seedfree import data, integers, seed_free_init
from torch.nn.utils.rnn import (
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)

lengths = [5, 2, 7, 3]
seqs = [data((n, 3), salt=i) for i, n in enumerate(lengths)]
packed = pack_sequence(seqs, enforce_sorted=False)
print(packed.data.shape, packed.batch_sizes.tolist(), packed.sorted_indices.tolist(), packed.unsorted_indices.tolist())
print(packed.batch_sizes.dtype, packed.is_cuda, type(packed).__name__, packed._fields)
padded = pad_sequence(seqs, batch_first=True)
left = pad_sequence(seqs, batch_first=True, padding_value=-1.0, padding_side='left')
print(tuple(padded.shape), left[1, :6, 0].tolist() == [-1.0] * 5 + [seqs[1][0, 0].item()],
      tuple(pad_sequence(seqs).shape))
again = pack_padded_sequence(padded, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
print('same packing', torch.equal(again.data, packed.data), torch.equal(again.batch_sizes, packed.batch_sizes))
print('unpack', all(torch.equal(a, b) for a, b in zip(unpack_sequence(packed), seqs)),
      all(torch.equal(a, b) for a, b in zip(unpad_sequence(padded, torch.tensor(lengths), batch_first=True), seqs)))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 6, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(3, 5, batch_first=True)
        self.fc = nn.Linear(2 * 6 + 5, 3)

    def forward(self, padded, lengths):
        pk = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = self.lstm(pk)
        h0 = torch.zeros(1, padded.size(0), 5)
        _, hg = self.gru(pk, h0)
        return self.fc(torch.cat([h[-2], h[-1], hg[0]], dim=1)), out


model = seed_free_init(Classifier(), salt=51)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
y = integers((4,), 3, salt=51)
for step in range(6):
    logits, out = model(padded, torch.tensor(lengths))
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('step', step, f'{loss.item():.7f}')
unpacked, out_lens = pad_packed_sequence(out, batch_first=True, total_length=9)
print(tuple(unpacked.shape), out_lens.tolist(), unpacked[1, 2:].abs().sum().item())
idx = (out_lens - 1).view(-1, 1, 1).expand(-1, 1, unpacked.size(2))
last = unpacked.gather(1, idx).squeeze(1)
print('last fwd == h', [round(v, 5) for v in last[:, :3].sum(0).tolist()])
tm, tl = pad_packed_sequence(out)
print(tuple(tm.shape), tl.tolist(), f'{tm.sum().item():.5f}')
