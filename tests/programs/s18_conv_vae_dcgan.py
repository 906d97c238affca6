# A convolutional VAE (Conv2d encoder, ConvTranspose2d decoder with output_padding, BCE-with-logits
# + KLD, the reparameterization trick) and a DCGAN step (generator of ConvTranspose2d + BatchNorm2d +
# ReLU/Tanh, discriminator of Conv2d + BatchNorm2d + LeakyReLU, weights_init via apply, label
# smoothing, Adam betas=(0.5, 0.999), D(x) / D(G(z)) means) on random data.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from _seedfree import data, seed_free_init


class ConvVAE(nn.Module):
    def __init__(self, zdim=6):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten())
        self.mu = nn.Linear(16 * 4 * 4, zdim)
        self.logvar = nn.Linear(16 * 4 * 4, zdim)
        self.fc = nn.Linear(zdim, 16 * 4 * 4)
        self.dec = nn.Sequential(nn.Unflatten(1, (16, 4, 4)),
                                 nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                                 nn.ConvTranspose2d(8, 1, 3, stride=2, padding=1, output_padding=1))

    def forward(self, x, eps):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + eps * torch.exp(0.5 * logvar)
        return self.dec(self.fc(z)), mu, logvar


vae = seed_free_init(ConvVAE(), salt=1)
opt = optim.Adam(vae.parameters(), lr=2e-3)
images = data((24, 1, 16, 16), salt=1, low=0.0, high=1.0)
noise = data((6, 24, 6), salt=2)
for step in range(6):
    x = images[(step % 3) * 8:(step % 3) * 8 + 8]
    recon, mu, logvar = vae(x, noise[step, :8])
    bce = F.binary_cross_entropy_with_logits(recon, x, reduction='sum')
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    loss = (bce + kld) / x.size(0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f'vae step {step} loss {loss.item():.6f} bce {bce.item():.5f} kld {kld.item():.6f}')
with torch.no_grad():
    sample = torch.sigmoid(vae.dec(vae.fc(noise[0, :4])))
print('vae sample', tuple(sample.shape), f'{sample.mean().item():.6f} {sample.std().item():.6f}')

nz, ngf, ndf, nc = 8, 8, 8, 1


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


torch.manual_seed(3)
netG, netD = Generator(), Discriminator()
netG.apply(weights_init)
netD.apply(weights_init)
seed_free_init(netG, salt=7)
seed_free_init(netD, salt=8)
print(netG.main[1])
criterion = nn.BCELoss()
optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_batches = data((4, 6, 1, 16, 16), salt=3)
zs = data((4, 6, nz, 1, 1), salt=4)
real_label, fake_label = 0.9, 0.
for i in range(4):
    netD.zero_grad()
    real = real_batches[i]
    b = real.size(0)
    label = torch.full((b,), real_label, dtype=real.dtype)
    output = netD(real)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = output.mean().item()
    fake = netG(zs[i])
    label.fill_(fake_label)
    output = netD(fake.detach())
    errD_fake = criterion(output, label)
    errD_fake.backward()
    D_G_z1 = output.mean().item()
    errD = errD_real + errD_fake
    optimizerD.step()
    netG.zero_grad()
    label.fill_(1.0)
    output = netD(fake)
    errG = criterion(output, label)
    errG.backward()
    D_G_z2 = output.mean().item()
    optimizerG.step()
    print('[%d/4] Loss_D: %.5f Loss_G: %.5f D(x): %.5f D(G(z)): %.5f / %.5f'
          % (i, errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
bn = netG.main[1]
print('bn running', f'{bn.running_mean.abs().sum().item():.6f} {bn.running_var.sum().item():.6f}',
      bn.num_batches_tracked.item())
netG.eval()
with torch.no_grad():
    fake = netG(zs[0])
print('eval fake', tuple(fake.shape), f'{fake.mean().item():.6f} {fake.abs().max().item():.6f}')
