# Advantage actor-critic (A2C) over a batch of gym-free environments: a shared trunk with policy and
# value heads, Categorical(logits=...) log_prob/entropy, actions drawn by the Gumbel-max trick from
# NumPy noise (seed-free), n-step bootstrapped returns computed backwards with done masks, the
# advantage detached for the policy term, an entropy bonus, RMSprop(eps, alpha) and
# clip_grad_norm_; then the distribution API the agent touches (probs/logits round trip,
# kl_divergence, enumerate_support, sample shapes, repr).
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import seed_free_init
from torch.distributions import Categorical, kl_divergence


class ChainEnvs:
    """N independent chains of 5 states; action 1 moves right (reward at the end), 0 resets."""
    def __init__(self, n):
        self.pos = np.zeros(n, dtype=np.int64)

    def obs(self):
        return F.one_hot(torch.from_numpy(self.pos), 5).float()

    def step(self, actions):
        rewards = np.zeros(len(self.pos), dtype=np.float32)
        dones = np.zeros(len(self.pos), dtype=np.float32)
        for i, a in enumerate(actions):
            if a == 1:
                self.pos[i] += 1
                if self.pos[i] == 4:
                    rewards[i], dones[i], self.pos[i] = 1.0, 1.0, 0
            else:
                self.pos[i] = 0
                rewards[i] = 0.05
        return self.obs(), torch.from_numpy(rewards), torch.from_numpy(dones)


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(5, 32), nn.Tanh())
        self.pi = nn.Linear(32, 2)
        self.v = nn.Linear(32, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.pi(h), self.v(h).squeeze(-1)


rs = np.random.RandomState(7)
envs = ChainEnvs(4)
net = seed_free_init(ActorCritic(), salt=11)
opt = torch.optim.RMSprop(net.parameters(), lr=7e-3, alpha=0.99, eps=1e-5)
obs = envs.obs()
gamma, n_steps = 0.9, 5
for update in range(8):
    log_probs, values, rewards, masks, entropies = [], [], [], [], []
    for _ in range(n_steps):
        logits, value = net(obs)
        dist = Categorical(logits=logits)
        gumbel = torch.from_numpy(-np.log(-np.log(rs.uniform(1e-6, 1 - 1e-6, size=logits.shape))).astype(np.float32))
        action = (logits.detach() + gumbel).argmax(-1)
        obs, reward, done = envs.step(action.tolist())
        log_probs.append(dist.log_prob(action))
        entropies.append(dist.entropy())
        values.append(value)
        rewards.append(reward)
        masks.append(1 - done)
    with torch.no_grad():
        _, ret = net(obs)
    returns = []
    for r, m in zip(reversed(rewards), reversed(masks)):
        ret = r + gamma * ret * m
        returns.insert(0, ret)
    returns = torch.stack(returns)
    values = torch.stack(values)
    advantage = returns - values
    policy_loss = -(torch.stack(log_probs) * advantage.detach()).mean()
    value_loss = advantage.pow(2).mean()
    entropy = torch.stack(entropies).mean()
    loss = policy_loss + 0.5 * value_loss - 0.01 * entropy
    opt.zero_grad()
    loss.backward()
    norm = nn.utils.clip_grad_norm_(net.parameters(), 0.5)
    opt.step()
    print(f'update {update} loss {loss.item():.6f} pi {policy_loss.item():.6f} v {value_loss.item():.6f} '
          f'H {entropy.item():.6f} norm {norm.item():.6f} R {returns.sum().item():.5f}')

probs = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
d = Categorical(probs=probs)
print(d)
print(d.logits, d.probs.sum(-1), d.batch_shape, d.event_shape, d.param_shape)
print(d.enumerate_support().shape, d.enumerate_support(expand=False).shape, d.sample((4, 5)).shape)
print(d.log_prob(torch.tensor([2, 0])), d.entropy(), d.mode, d.mean if False else None)
q = Categorical(logits=torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, -1.0]]))
print(kl_divergence(d, q), kl_divergence(q, d))
print(Categorical(probs=torch.tensor([0.0, 1.0])).entropy(), Categorical(probs=torch.tensor([1., 3.])).probs)
