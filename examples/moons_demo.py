"""Two interleaving half-moons, classified by a small MLP trained with mytorch.

    python examples/moons_demo.py                 # 300 steps, prints loss and accuracy
    python examples/moons_demo.py --quick         # 30 steps (CI)
    python examples/moons_demo.py --plot moons.png  # also draws the decision boundary (matplotlib)
"""
import argparse

import numpy as np

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
from mytorch.datasets import make_moons


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="30 steps, for CI")
    ap.add_argument("--plot", metavar="PNG", help="save the decision boundary to this file")
    args = ap.parse_args(argv)
    if args.quick: args.steps = 30
    mytorch.manual_seed(0)
    X, y = make_moons(n_samples=200, noise=0.1, random_state=0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = optim.Adam(model.parameters(), lr=0.02)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(args.steps):
        logits = model(X)
        loss = loss_fn(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % max(1, args.steps // 6) == 0 or step == args.steps - 1:
            acc = (logits.argmax(1) == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {acc:.1%}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        xs, ys = np.meshgrid(np.linspace(-1.5, 2.5, 200), np.linspace(-1.0, 1.5, 150))
        grid = mytorch.tensor(np.stack([xs.ravel(), ys.ravel()], 1).astype(np.float32))
        with mytorch.no_grad(): zs = model(grid).argmax(1).numpy().reshape(xs.shape)
        plt.contourf(xs, ys, zs, alpha=0.3, cmap="coolwarm")
        plt.scatter(X.numpy()[:, 0], X.numpy()[:, 1], c=y.numpy(), cmap="coolwarm", s=12, edgecolors="k", linewidths=0.3)
        plt.savefig(args.plot, dpi=120, bbox_inches="tight")
        print(f"decision boundary saved to {args.plot}")
    return acc


if __name__ == "__main__":
    main()
