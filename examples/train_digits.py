"""The main job: train a small CNN on the 8x8 handwritten digits, end to end, with ember.

Written as an ordinary PyTorch script (``import ember as torch``): a Dataset and DataLoader,
an nn.Module CNN, Adam with a cosine learning-rate schedule, a tqdm progress bar, then a
checkpoint saved with ``torch.save``, reloaded into a fresh model, and checked to score the
same. The data (1,797 images, UCI, CC BY 4.0) ships in ``examples/data`` (see its README).

    python examples/train_digits.py [--epochs N] [--checkpoint PATH]
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import ember as torch
import ember.nn as nn
import ember.nn.functional as F
from ember.utils.data import DataLoader, TensorDataset, random_split

DATA = Path(__file__).resolve().parent / "data" / "digits.csv.gz"


def load_digits() -> TensorDataset:
    with gzip.open(DATA, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    images = torch.from_numpy(table[:, :64].reshape(-1, 1, 8, 8) / 16.0)  # pixels are 0..16
    labels = torch.from_numpy(table[:, 64].astype(np.int64))
    return TensorDataset(images, labels)


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, kernel_size=3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += int((model(images).argmax(dim=1) == labels).sum())
            total += labels.numel()
    return correct / total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--checkpoint", type=Path, default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    dataset = load_digits()
    train_set, test_set = random_split(dataset, [0.8, 0.2], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(1))
    test_loader = DataLoader(test_set, batch_size=256)
    print(f"digits: {len(train_set)} training and {len(test_set)} test images, 10 classes")

    model = DigitsCNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        bar = tqdm(train_loader, desc=f"epoch {epoch + 1:2d}/{args.epochs}", leave=False, file=sys.stdout)
        for images, labels in bar:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=f"{loss.item():.4f}")
        scheduler.step()
        print(f"epoch {epoch + 1:2d}: last loss {loss.item():.4f}, test accuracy {evaluate(model, test_loader):.4f}")
    accuracy = evaluate(model, test_loader)
    print(f"trained in {time.perf_counter() - start:.1f} s; test accuracy {accuracy:.4f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = args.checkpoint or Path(tmp) / "digits_cnn.pt"
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": args.epochs}, path)
        checkpoint = torch.load(path)
        restored = DigitsCNN()
        restored.load_state_dict(checkpoint["model"])
        restored_accuracy = evaluate(restored, test_loader)
        print(f"checkpoint {path.name} ({os.path.getsize(path) / 1024:.0f} KiB) reloaded: "
              f"test accuracy {restored_accuracy:.4f}")

    if accuracy < 0.97:
        print(f"FAILED: test accuracy {accuracy:.4f} is below 0.97")
        return 1
    if restored_accuracy != accuracy:
        print("FAILED: the reloaded model does not score the same")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
