# pytorch/examples super_resolution, from memory: ESPCN-style Net with PixelShuffle and
# orthogonal_ init, Adam + MSELoss, PSNR from log10.
import math

import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(8, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv4.weight)


torch.manual_seed(123)
upscale = 3
model = Net(upscale_factor=upscale)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=0.01)
hr = torch.rand(4, 1, 24, 24)
lr_img = nn.functional.avg_pool2d(hr, upscale)
for epoch in range(1, 5):
    optimizer.zero_grad()
    loss = criterion(model(lr_img), hr)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        mse = criterion(model(lr_img), hr)
        psnr = 10 * math.log10(1 / mse.item())
    print("===> Epoch {} Complete: Loss: {:.6f} PSNR: {:.4f} dB".format(epoch, loss.item(), psnr))
unshuffled = nn.PixelUnshuffle(upscale)(hr)
print(tuple(unshuffled.shape), torch.equal(nn.PixelShuffle(upscale)(unshuffled), hr))
