# Policy-gradient and decoding programs: PPO on a small grid-walk environment (a shared actor-critic
# trunk, Categorical(logits=...), generalised advantage estimation by a reversed loop, advantage
# normalisation, the clipped surrogate with value clipping and an entropy bonus, minibatches from
# randperm, approx-KL early stopping, clip_grad_norm_), a SAC-style squashed Gaussian policy
# (Normal rsample + tanh with the log-det correction, a TransformedDistribution with TanhTransform
# for comparison, twin Q targets with min, soft target updates with torch._foreach_lerp_/mul_/
# add_, automatic entropy tuning of log_alpha), and beam search over a toy GRU decoder (topk over
# flattened beam x vocab scores, gather-based beam reordering, finished hypotheses with a length
# penalty, unpad_sequence/unpack_sequence of the results).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Normal, TanhTransform, TransformedDistribution
from torch.nn.utils.rnn import pack_sequence, pad_sequence, unpack_sequence, unpad_sequence

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


class GridWalk:
    """Walk on a line of 7 cells, start in the middle; +1 at the right end, -1 at the left."""

    def __init__(self, n_envs):
        self.n = n_envs
        self.pos = torch.full((n_envs,), 3)

    def obs(self):
        return F.one_hot(self.pos, 7).float()

    def step(self, action):
        self.pos = self.pos + torch.where(action == 1, 1, -1)
        reward = (self.pos == 6).float() - (self.pos == 0).float() - 0.01
        done = (self.pos == 6) | (self.pos == 0)
        self.pos = torch.where(done, torch.full_like(self.pos, 3), self.pos)
        return self.obs(), reward, done


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(7, 32), nn.Tanh())
        self.pi = nn.Linear(32, 2)
        self.v = nn.Linear(32, 1)
        nn.init.orthogonal_(self.pi.weight, gain=0.01)
        nn.init.zeros_(self.pi.bias)

    def forward(self, obs):
        h = self.trunk(obs)
        return Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)


env = GridWalk(8)
ac = ActorCritic()
opt = torch.optim.Adam(ac.parameters(), lr=3e-3, eps=1e-5)
gamma, lam, clip = 0.99, 0.95, 0.2
obs = env.obs()
for update in range(4):
    buf = {k: [] for k in ("obs", "act", "logp", "rew", "done", "val")}
    with torch.no_grad():
        for t in range(16):
            dist, val = ac(obs)
            act = dist.sample()
            buf["obs"].append(obs)
            buf["act"].append(act)
            buf["logp"].append(dist.log_prob(act))
            buf["val"].append(val)
            obs, rew, done = env.step(act)
            buf["rew"].append(rew)
            buf["done"].append(done.float())
        _, last_val = ac(obs)
    b = {k: torch.stack(v) for k, v in buf.items()}
    adv = torch.zeros_like(b["rew"])
    gae = torch.zeros(env.n)
    for t in reversed(range(16)):
        next_val = last_val if t == 15 else b["val"][t + 1]
        nonterm = 1.0 - b["done"][t]
        delta = b["rew"][t] + gamma * next_val * nonterm - b["val"][t]
        gae = delta + gamma * lam * nonterm * gae
        adv[t] = gae
    ret = adv + b["val"]
    flat = {k: v.reshape(-1, *v.shape[2:]) for k, v in b.items()}
    flat_adv, flat_ret = adv.reshape(-1), ret.reshape(-1)
    stats = []
    for epoch in range(3):
        perm = torch.randperm(flat_adv.numel())
        for mb in perm.split(32):
            dist, val = ac(flat["obs"][mb])
            logp = dist.log_prob(flat["act"][mb])
            ratio = (logp - flat["logp"][mb]).exp()
            a = flat_adv[mb]
            a = (a - a.mean()) / (a.std() + 1e-8)
            pg = -torch.min(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a).mean()
            v_clipped = flat["val"][mb] + (val - flat["val"][mb]).clamp(-clip, clip)
            v_loss = 0.5 * torch.max((val - flat_ret[mb]) ** 2, (v_clipped - flat_ret[mb]) ** 2).mean()
            ent = dist.entropy().mean()
            loss = pg + 0.5 * v_loss - 0.01 * ent
            opt.zero_grad()
            loss.backward()
            norm = nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
            opt.step()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - (logp - flat["logp"][mb])).mean()
        stats.append((round(loss.item(), 5), round(approx_kl.item(), 6), round(norm.item(), 5)))
        if approx_kl > 0.02:
            break
    print(f"ppo update {update} reward {b['rew'].sum().item():.3f} stats {stats}")
with torch.no_grad():
    probs = ac(torch.eye(7))[0].probs
print("policy right-probs", r(probs[:, 1], 4))


# --- SAC pieces ---
class Actor(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU())
        self.mu = nn.Linear(32, act_dim)
        self.log_std = nn.Linear(32, act_dim)

    def forward(self, obs):
        h = self.net(obs)
        mu, log_std = self.mu(h), self.log_std(h).clamp(-5, 2)
        normal = Normal(mu, log_std.exp())
        u = normal.rsample()
        a = torch.tanh(u)
        logp = normal.log_prob(u).sum(-1) - (2 * (torch.log(torch.tensor(2.0)) - u - F.softplus(-2 * u))).sum(-1)
        squashed = TransformedDistribution(Normal(mu, log_std.exp()), [TanhTransform(cache_size=1)])
        return a, logp, squashed.log_prob(a).sum(-1)


def make_q(obs_dim, act_dim):
    return nn.Sequential(nn.Linear(obs_dim + act_dim, 32), nn.ReLU(), nn.Linear(32, 1))


obs_dim, act_dim = 3, 2
actor = Actor(obs_dim, act_dim)
q1, q2 = make_q(obs_dim, act_dim), make_q(obs_dim, act_dim)
q1_t, q2_t = make_q(obs_dim, act_dim), make_q(obs_dim, act_dim)
q1_t.load_state_dict(q1.state_dict())
q2_t.load_state_dict(q2.state_dict())
log_alpha = torch.zeros(1, requires_grad=True)
target_entropy = -float(act_dim)
q_opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=1e-3)
pi_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
a_opt = torch.optim.Adam([log_alpha], lr=1e-2)
S, A = torch.randn(64, obs_dim), torch.rand(64, act_dim) * 2 - 1
R, S2, D = torch.randn(64), torch.randn(64, obs_dim), (torch.rand(64) < 0.1).float()
for it in range(5):
    idx = torch.randint(0, 64, (16,))
    s, a, rew, s2, d = S[idx], A[idx], R[idx], S2[idx], D[idx]
    alpha = log_alpha.exp().detach()
    with torch.no_grad():
        a2, logp2, _ = actor(s2)
        sa2 = torch.cat([s2, a2], -1)
        q_targ = torch.min(q1_t(sa2), q2_t(sa2)).squeeze(-1) - alpha * logp2
        backup = rew + 0.99 * (1 - d) * q_targ
    sa = torch.cat([s, a], -1)
    q_loss = F.mse_loss(q1(sa).squeeze(-1), backup) + F.mse_loss(q2(sa).squeeze(-1), backup)
    q_opt.zero_grad()
    q_loss.backward()
    q_opt.step()
    for p in list(q1.parameters()) + list(q2.parameters()):
        p.requires_grad_(False)
    pi_a, logp, logp_td = actor(s)
    sa_pi = torch.cat([s, pi_a], -1)
    pi_loss = (alpha * logp - torch.min(q1(sa_pi), q2(sa_pi)).squeeze(-1)).mean()
    pi_opt.zero_grad()
    pi_loss.backward()
    pi_opt.step()
    for p in list(q1.parameters()) + list(q2.parameters()):
        p.requires_grad_(True)
    a_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
    a_opt.zero_grad()
    a_loss.backward()
    a_opt.step()
    with torch.no_grad():
        for net, targ in ((q1, q1_t), (q2, q2_t)):
            torch._foreach_lerp_(list(targ.parameters()), list(net.parameters()), 0.005)
    print(f"sac it {it} q {q_loss.item():.5f} pi {pi_loss.item():.5f} alpha {log_alpha.exp().item():.5f} "
          f"logp match {torch.allclose(logp, logp_td, atol=1e-3)}")
with torch.no_grad():
    tp = [p.clone() for p in q1_t.parameters()]
    torch._foreach_mul_(tp, 0.5)
    torch._foreach_add_(tp, list(q1.parameters()), alpha=0.5)
    print("polyak by foreach", r(tp[0][0, :3]), "norms", r(torch.stack(torch._foreach_norm(tp))))


# --- beam search ---
class ToyDecoder(nn.Module):
    def __init__(self, vocab=7, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.gru = nn.GRUCell(dim, dim)
        self.out = nn.Linear(dim, vocab)

    def step(self, tok, h):
        h = self.gru(self.emb(tok), h)
        return F.log_softmax(self.out(h), -1), h


BOS, EOS = 0, 1
dec = ToyDecoder()


@torch.no_grad()
def beam_search(h0, beam=3, max_len=6, alpha=0.7):
    vocab = dec.out.out_features
    h = h0.expand(beam, -1).contiguous()
    tokens = torch.full((beam, 1), BOS)
    scores = torch.tensor([0.0] + [float("-inf")] * (beam - 1))
    finished = []
    for t in range(max_len):
        logp, h = dec.step(tokens[:, -1], h)
        cand = (scores.unsqueeze(1) + logp).view(-1)
        top, flat = cand.topk(2 * beam)
        origin, tok = flat // vocab, flat % vocab
        new_tokens, new_scores, new_origin = [], [], []
        for s, o, w in zip(top.tolist(), origin.tolist(), tok.tolist()):
            seq = torch.cat([tokens[o], torch.tensor([w])])
            if w == EOS:
                finished.append((s / ((5 + len(seq)) / 6) ** alpha, seq))
            else:
                new_tokens.append(seq)
                new_scores.append(s)
                new_origin.append(o)
            if len(new_tokens) == beam:
                break
        tokens = torch.stack(new_tokens)
        scores = torch.tensor(new_scores)
        h = h.gather(0, torch.tensor(new_origin).unsqueeze(1).expand(-1, h.size(1)))
    for s, seq in zip(scores.tolist(), tokens):
        finished.append((s / ((5 + len(seq)) / 6) ** alpha, seq))
    finished.sort(key=lambda x: -x[0])
    return finished[:beam]


hyps = beam_search(torch.randn(1, 16))
for s, seq in hyps:
    print("hyp", round(s, 5), seq.tolist())
seqs = [seq for _, seq in hyps]
lengths = torch.tensor([len(s) for s in seqs])
padded = pad_sequence(seqs, batch_first=True, padding_value=-1)
print("padded", padded.tolist(), "lengths", lengths.tolist())
print("unpad", [t.tolist() for t in unpad_sequence(padded, lengths, batch_first=True)])
packed = pack_sequence(seqs, enforce_sorted=False)
print("packed batch_sizes", packed.batch_sizes.tolist(), "sorted", packed.sorted_indices.tolist())
print("unpack", [t.tolist() for t in unpack_sequence(packed)])
