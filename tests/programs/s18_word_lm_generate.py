# pytorch/examples word_language_model, from memory, both model kinds: RNNModel (LSTM, tied weights,
# dropout) and TransformerModel (PositionalEncoding buffer, nn.TransformerEncoder with a square
# subsequent mask), trained with truncated BPTT, manual SGD via p.data.add_, clip_grad_norm_,
# evaluated, then generate.py: sampling words with multinomial on exp(logits / temperature).
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import integers, seed_free_init


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError('When using the tied flag, nhid must be equal to emsize')
            self.decoder.weight = self.encoder.weight
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                                               num_encoder_layers=nlayers)
        self.model_type = 'Transformer'
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self._generate_square_subsequent_mask(len(src))
        else:
            self.src_mask = None
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=7):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


ntokens = 40
corpus = integers((400,), ntokens, salt=3)
train_data = batchify(corpus[:300], 4)
val_data = batchify(corpus[300:], 2)
criterion = nn.NLLLoss()

for kind in ('LSTM', 'Transformer'):
    torch.manual_seed(11)
    if kind == 'Transformer':
        model = TransformerModel(ntokens, 16, 2, 32, 2, dropout=0.2)
    else:
        model = RNNModel('LSTM', ntokens, 16, 16, 2, dropout=0.2, tie_weights=True)
    seed_free_init(model, salt=len(kind))
    print(kind, sum(p.numel() for p in model.parameters()), 'parameters')
    lr = 2.0 if kind == 'LSTM' else 0.5
    for epoch in range(2):
        model.train()
        total_loss = 0.
        if kind != 'Transformer':
            hidden = model.init_hidden(4)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, 7)):
            data, targets = get_batch(train_data, i)
            model.zero_grad()
            if kind == 'Transformer':
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            if batch % 4 == 0:
                print('| {} epoch {:1d} | batch {:2d} | lr {:.2f} | loss {:.5f} | ppl {:8.3f} | norm {:.5f}'.format(
                    kind, epoch, batch, lr, loss.item(), math.exp(loss.item()), norm.item()))
        model.eval()
        val_loss = 0.
        with torch.no_grad():
            if kind != 'Transformer':
                hidden = model.init_hidden(2)
            for i in range(0, val_data.size(0) - 1, 7):
                data, targets = get_batch(val_data, i)
                if kind == 'Transformer':
                    output = model(data).view(-1, ntokens)
                else:
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                val_loss += len(data) * criterion(output, targets).item()
        val_loss /= (len(val_data) - 1)
        print('| end of epoch {} | valid loss {:.5f} | valid ppl {:8.3f}'.format(epoch, val_loss, math.exp(val_loss)))
        lr /= 4.0

    # generate.py
    torch.manual_seed(5)
    words = []
    input = torch.randint(ntokens, (1, 1), dtype=torch.long)
    if kind != 'Transformer':
        hidden = model.init_hidden(1)
    with torch.no_grad():
        for i in range(12):
            if kind == 'Transformer':
                output = model(input, False)
                word_weights = output[-1].squeeze().div(0.8).exp().cpu()
                word_idx = torch.multinomial(word_weights, 1)[0]
                word_tensor = torch.Tensor([[word_idx]]).long()
                input = torch.cat([input, word_tensor], 0)
            else:
                output, hidden = model(input, hidden)
                word_weights = output.squeeze().div(0.8).exp().cpu()
                word_idx = torch.multinomial(word_weights, 1)[0]
                input.fill_(word_idx)
            words.append(int(word_idx))
    print(kind, 'generated', words, tuple(input.shape))
    print(kind, 'state keys', len(model.state_dict()), list(model.state_dict())[:4])
sys.stdout.flush()
