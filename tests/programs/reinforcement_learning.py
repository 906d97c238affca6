# pytorch/examples reinforcement_learning (reinforce.py, actor_critic.py), from memory, with a
# small deterministic chain environment in place of gym's CartPole.
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

eps = np.finfo(np.float32).eps.item()
gamma = 0.99


class ChainEnv:
    def __init__(self):
        self.pos = 0

    def reset(self, seed=None):
        self.pos = 0
        return np.array([0.0, 1.0, 0.0, 0.5], dtype=np.float32), {}

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        state = np.array([self.pos / 5.0, 1.0, float(action), 0.5 - self.pos / 10], dtype=np.float32)
        done = abs(self.pos) >= 4
        reward = 1.0 if action == 1 else 0.1
        return state, reward, done, False, {}


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 32)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(32, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


def reinforce(env):
    policy = Policy()
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)

    def select_action(state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        action = m.sample()
        policy.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = []
        for r in policy.rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(policy.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        optimizer.step()
        del policy.rewards[:]
        del policy.saved_log_probs[:]
        return policy_loss.item()

    running_reward = 10
    for i_episode in range(6):
        state, _ = env.reset(seed=543)
        ep_reward = 0
        for t in range(1, 10):
            action = select_action(state)
            state, reward, done, _, _ = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        loss = finish_episode()
        print('reinforce episode {}\tsteps {}\treward: {:.2f}\trunning: {:.4f}\tloss {:.6f}'.format(
            i_episode, t, ep_reward, running_reward, loss))


SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])


class ActorCritic(nn.Module):
    def __init__(self):
        super(ActorCritic, self).__init__()
        self.affine1 = nn.Linear(4, 32)
        self.action_head = nn.Linear(32, 2)
        self.value_head = nn.Linear(32, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


def actor_critic(env):
    model = ActorCritic()
    optimizer = optim.Adam(model.parameters(), lr=3e-2)
    for i_episode in range(6):
        state, _ = env.reset()
        for t in range(1, 10):
            s = torch.from_numpy(state).float()
            probs, state_value = model(s)
            m = Categorical(probs)
            action = m.sample()
            model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
            state, reward, done, _, _ = env.step(action.item())
            model.rewards.append(reward)
            if done:
                break
        R = 0
        saved_actions = model.saved_actions
        policy_losses = []
        value_losses = []
        returns = []
        for r in model.rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for (log_prob, value), R in zip(saved_actions, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        del model.rewards[:]
        del model.saved_actions[:]
        print('actor-critic episode {}\tsteps {}\tloss {:.6f}\tentropy {:.6f}'.format(
            i_episode, t, loss.item(), m.entropy().item()))


torch.manual_seed(543)
reinforce(ChainEnv())
actor_critic(ChainEnv())
