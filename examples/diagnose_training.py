"""One deep tanh network on the digits, four initializations, and what TrainingMonitor says about each.

    python examples/diagnose_training.py --compare            # the four setups, one table
    python examples/diagnose_training.py --setup vanishing    # one setup, with its full report
    python examples/diagnose_training.py --compare --steps 40 # shorter runs (CI)

The network: 64 -> 5 x 100 tanh -> 10, trained with plain SGD (lr 0.1, batches of 64) on
scikit-learn's 8x8 digits. Only the initialization of the Linear weights changes:

    saturated   std 1 ("just use randn"): most tanh outputs pinned at +-1
    vanishing   std 0.1 / sqrt(fan_in): the gradient shrinks ~10x per layer on its way back
    batchnorm   the saturated initialization, with BatchNorm1d before every tanh
    healthy     std (5/3) / sqrt(fan_in) (Kaiming, tanh gain), output layer x0.1

Needs scikit-learn for the data set (`pip install "mytorch[examples]"`).
"""
import argparse
import math

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
from mytorch.datasets import load_digits
from mytorch.diagnostics import TrainingMonitor
from mytorch.nn.normalization import BatchNorm1d

INIT_STD = {
    "saturated": lambda fan_in: 1.0,
    "vanishing": lambda fan_in: 0.1 / math.sqrt(fan_in),
    "healthy": lambda fan_in: (5 / 3) / math.sqrt(fan_in),
}
SETUPS = {"saturated": ("saturated", False), "vanishing": ("vanishing", False),
          "batchnorm": ("saturated", True), "healthy": ("healthy", False)}


class DeepTanhMLP(nn.Module):
    "64 -> width x (depth-1) tanh layers -> 10; `init` picks the weight scale, `batchnorm` adds BatchNorm1d before each tanh."
    def __init__(self, init, batchnorm=False, width=100, depth=6, seed=0):
        super().__init__()
        gen = mytorch.Generator().manual_seed(seed)
        layers, n_in = [], 64
        for i in range(depth):
            last = i == depth - 1
            # A bias before BatchNorm1d is subtracted away with the batch mean: leave it out.
            lin = nn.Linear(n_in, 10 if last else width, bias=last or not batchnorm, generator=gen)
            std = INIT_STD[init](n_in) * (0.1 if last and init == "healthy" else 1.0)
            nn.init.normal_(lin.weight, 0.0, std, generator=gen)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
            layers.append(lin)
            if not last:
                if batchnorm:
                    layers.append(BatchNorm1d(width))
                layers.append(nn.Tanh())
            n_in = width
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


def run(setup, steps=100, lr=0.1, batch=64, seed=0):
    "Train one setup under a TrainingMonitor; return (monitor, losses)."
    X, y = load_digits()
    X = X / 16.0
    init, batchnorm = SETUPS[setup]
    model = DeepTanhMLP(init, batchnorm, seed=seed)
    opt = optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = mytorch.Generator().manual_seed(seed + 1)
    losses = []
    with TrainingMonitor(model) as monitor:
        for _ in range(steps):
            idx = mytorch.randint(0, len(y), (batch,), generator=gen)
            loss = loss_fn(model(X[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            monitor.record(learning_rate=lr)   # after backward, before the step
            opt.step()
            losses.append(loss.item())
    return monitor, losses


HEADER = f"{'setup':<10}  {'saturation':>10}  {'grad first/last':>15}  {'loss start -> end':<20}  diagnosis"


def row(setup, monitor, losses):
    "One line of the table: the loss 'end' is the mean of the last ten steps."
    kinds = list(dict.fromkeys(f.kind for f in monitor.findings()))
    sat, ratio = monitor.saturation(), monitor.gradient_ratio()
    end = sum(losses[-10:]) / len(losses[-10:])
    return (f"{setup:<10}  {'-' if sat is None else format(sat, '.0%'):>10}  "
            f"{'-' if ratio is None else format(ratio, '.2e'):>15}  {f'{losses[0]:.3f} -> {end:.3f}':<20}  "
            f"{', '.join(kinds) or 'none'}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--compare", action="store_true", help="run the four setups and print one table (the default)")
    what.add_argument("--setup", choices=list(SETUPS), help="run one setup and print its full report")
    ap.add_argument("--steps", type=int, default=100, help="training steps per setup (default 100)")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    setups = [args.setup] if args.setup else list(SETUPS)
    print(HEADER)
    print("-" * len(HEADER))
    monitors = {}
    for setup in setups:
        monitor, losses = run(setup, args.steps, args.lr, seed=args.seed)
        monitors[setup] = monitor
        print(row(setup, monitor, losses), flush=True)
    if args.setup:
        print()
        print(monitors[args.setup].report())
    return monitors


if __name__ == "__main__":
    main()
