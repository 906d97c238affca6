# A DQN as the reinforcement-learning tutorial writes it, with a gym-free grid environment: a
# namedtuple Transition and a deque ReplayMemory sampled by NumPy, epsilon-greedy action choice,
# policy_net(state).gather(1, action), target_net(next).max(1).values under no_grad with a
# non-final mask, SmoothL1Loss, AdamW(amsgrad=True), clip_grad_value_, and the soft target update
# through state_dict arithmetic.
import math
from collections import deque, namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from _seedfree import seed_free_init

Transition = namedtuple('Transition', ('state', 'action', 'next_state', 'reward'))


class ReplayMemory:
    def __init__(self, capacity, rs):
        self.memory = deque([], maxlen=capacity)
        self.rs = rs

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        idx = self.rs.choice(len(self.memory), batch_size, replace=False)
        return [self.memory[i] for i in idx]

    def __len__(self):
        return len(self.memory)


class GridEnv:
    """Walk on a 1-d strip of 6 cells; reward 1 at the right end, -0.1 per step."""
    def reset(self):
        self.pos = 0
        return self.obs()

    def obs(self):
        return torch.tensor([[self.pos / 5.0, 1.0 - self.pos / 5.0, float(self.pos == 5)]])

    def step(self, action):
        self.pos = max(0, min(5, self.pos + (1 if action == 1 else -1)))
        done = self.pos == 5
        return self.obs(), (1.0 if done else -0.1), done


class DQN(nn.Module):
    def __init__(self, n_obs, n_actions):
        super().__init__()
        self.layer1 = nn.Linear(n_obs, 32)
        self.layer2 = nn.Linear(32, 32)
        self.layer3 = nn.Linear(32, n_actions)

    def forward(self, x):
        x = torch.relu(self.layer1(x))
        x = torch.relu(self.layer2(x))
        return self.layer3(x)


BATCH_SIZE, GAMMA, EPS_START, EPS_END, EPS_DECAY, TAU, LR = 8, 0.9, 0.9, 0.05, 50, 0.05, 1e-3
rs = np.random.RandomState(0)
env = GridEnv()
policy_net = seed_free_init(DQN(3, 2), salt=1)
target_net = DQN(3, 2)
target_net.load_state_dict(policy_net.state_dict())
optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(100, rs)
steps_done = 0


def select_action(state):
    global steps_done
    eps = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)
    steps_done += 1
    if rs.rand() > eps:
        with torch.no_grad():
            return policy_net(state).max(1).indices.view(1, 1)
    return torch.tensor([[rs.randint(2)]], dtype=torch.long)


def optimize_model():
    if len(memory) < BATCH_SIZE:
        return None
    batch = Transition(*zip(*memory.sample(BATCH_SIZE)))
    non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)), dtype=torch.bool)
    non_final_next = [s for s in batch.next_state if s is not None]
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE)
    with torch.no_grad():
        if non_final_next:
            next_state_values[non_final_mask] = target_net(torch.cat(non_final_next)).max(1).values
    expected = (next_state_values * GAMMA) + reward_batch
    loss = nn.SmoothL1Loss()(state_action_values, expected.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()
    return loss.item()


for episode in range(6):
    state = env.reset()
    total, losses = 0.0, []
    for t in range(20):
        action = select_action(state)
        observation, reward, done = env.step(action.item())
        total += reward
        next_state = None if done else observation
        memory.push(state, action, next_state, torch.tensor([reward]))
        state = observation if not done else None
        loss = optimize_model()
        if loss is not None:
            losses.append(loss)
        target_sd, policy_sd = target_net.state_dict(), policy_net.state_dict()
        for key in policy_sd:
            target_sd[key] = policy_sd[key] * TAU + target_sd[key] * (1 - TAU)
        target_net.load_state_dict(target_sd)
        if done:
            break
    print(f'episode {episode} steps {t + 1} return {total:.2f} mean loss {np.mean(losses) if losses else 0:.6f}')
with torch.no_grad():
    probe = GridEnv()
    states = []
    for pos in range(6):
        probe.pos = pos
        states.append(probe.obs())
    q = policy_net(torch.cat(states))
print('q', [[round(v, 5) for v in row] for row in q.tolist()], 'greedy', q.argmax(1).tolist(), 'mem', len(memory))
print(optimizer.state_dict()['state'][0].keys())
