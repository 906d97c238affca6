# pytorch/examples siamese_network, from memory: a shared conv tower, the two embeddings
# concatenated into a sigmoid head, BCELoss, Adadelta with StepLR, pairs from a Dataset.
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


class SiameseNetwork(nn.Module):
    def __init__(self):
        super(SiameseNetwork, self).__init__()
        self.tower = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=3), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
            nn.MaxPool2d(2), nn.Conv2d(4, 8, kernel_size=3), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)))
        self.fc = nn.Sequential(nn.Linear(8 * 2, 16), nn.ReLU(inplace=True), nn.Linear(16, 1))
        self.sigmoid = nn.Sigmoid()
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.tower(x)
        output = output.view(output.size()[0], -1)
        return output

    def forward(self, input1, input2):
        output1 = self.forward_once(input1)
        output2 = self.forward_once(input2)
        output = torch.cat((output1, output2), 1)
        output = self.fc(output)
        output = self.sigmoid(output)
        return output


class PairDataset(Dataset):
    def __init__(self, images, labels):
        super().__init__()
        self.images, self.labels = images, labels
        self.group = {int(c): torch.nonzero(labels == c).flatten().tolist() for c in labels.unique()}

    def __getitem__(self, index):
        image_1 = self.images[index]
        cls = int(self.labels[index])
        if index % 2 == 0:
            j = random.choice(self.group[cls])
            target = torch.tensor(1, dtype=torch.float)
        else:
            other = random.choice([c for c in self.group if c != cls])
            j = random.choice(self.group[other])
            target = torch.tensor(0, dtype=torch.float)
        return image_1, self.images[j], target

    def __len__(self):
        return len(self.labels)


random.seed(0)
torch.manual_seed(1)
images = torch.randn(40, 1, 12, 12)
labels = torch.randint(0, 4, (40,))
loader = DataLoader(PairDataset(images, labels), batch_size=8, shuffle=True)
model = SiameseNetwork()
optimizer = optim.Adadelta(model.parameters(), lr=1.0)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
criterion = nn.BCELoss()
for epoch in range(2):
    model.train()
    for batch_idx, (images_1, images_2, targets) in enumerate(loader):
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        print("epoch", epoch, "batch", batch_idx, "loss {:.6f}".format(loss.item()))
    scheduler.step()
model.eval()
with torch.no_grad():
    out = model(images[:6], images[6:12]).squeeze()
    pred = torch.where(out > 0.5, 1, 0)
    print("pred", pred.tolist(), "bn", model.tower[1].running_mean.numpy().round(5).tolist(),
          int(model.tower[1].num_batches_tracked))
    e1, e2 = model.forward_once(images[:3]), model.forward_once(images[3:6])
    print(F.pairwise_distance(e1, e2).numpy().round(5).tolist())
    print(F.cosine_similarity(e1, e2).numpy().round(5).tolist())
