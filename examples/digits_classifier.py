"""An MLP on scikit-learn's 8x8 digits, written as a PyTorch user would write it.

    python examples/digits_classifier.py            # 8 epochs, prints the test accuracy
    python examples/digits_classifier.py --quick    # 2 epochs on part of the data (CI)

Needs scikit-learn for the data set (`pip install "mytorch[examples]"`).
"""
import argparse
import time

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
from mytorch.datasets import load_digits
from mytorch.utils.data import DataLoader, TensorDataset, random_split


def accuracy(model, loader):
    model.eval()
    correct = total = 0
    with mytorch.no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(1) == y).sum().item())
            total += len(y)
    model.train()
    return correct / total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="2 epochs on 600 training images, for CI")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args(argv)
    mytorch.manual_seed(args.seed)
    X, y = load_digits()
    X = X / 16.0
    data = TensorDataset(X, y)
    train, test = random_split(data, [0.8, 0.2], generator=mytorch.Generator().manual_seed(args.seed))
    if args.quick: train, args.epochs = mytorch.utils.data.Subset(train, range(600)), 2
    train_loader = DataLoader(train, batch_size=32, shuffle=True, generator=mytorch.Generator().manual_seed(args.seed))
    test_loader = DataLoader(test, batch_size=256)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"digits: {len(train)} train / {len(test)} test images, MLP with {n_params:,} parameters")
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        total = 0.0
        for x, t in train_loader:
            loss = loss_fn(model(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(t)
        print(f"epoch {epoch + 1}: train loss {total / len(train):.4f}, test accuracy {accuracy(model, test_loader):.1%}")
    acc = accuracy(model, test_loader)
    print(f"test accuracy after {args.epochs} epoch(s): {acc:.1%} ({time.perf_counter() - t0:.1f} s)")
    return acc


if __name__ == "__main__":
    main()
