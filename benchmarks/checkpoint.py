"""Memory for compute: bytes kept for backward and training-step time, with and without checkpointing.

For a 32-block MLP (Linear + ReLU per block) and the digits CNN of examples/digits_cnn.py, five ways
to run a training step (forward and backward of mean(output^2)):

- keep everything (no checkpointing);
- checkpoint_sequential with round(sqrt(n)) chunks;
- plan_segments at three budgets: the smallest it accepts, the sqrt(n) plan's peak, and half-way
  between that and keeping everything.

Columns: the budget; the chain model's peak; the bytes measured (through saved-tensor hooks) as
kept after the forward, and that plus the largest segment's recomputation (the peak); the model's
recompute cost (the measured forward time of the recomputed layers); and the fastest step time.
Float64, one thread:

    .venv/bin/python benchmarks/checkpoint.py
    .venv/bin/python benchmarks/checkpoint.py --width 512 --batch 512
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import math
import time

import mytorch
import mytorch.nn as nn
from mytorch.nn.conv import Conv2d
from mytorch.nn.normalization import BatchNorm2d
from mytorch.nn.pooling import MaxPool2d
from mytorch.utils.checkpoint import (checkpoint_sequential, measure, plan_cost, plan_memory, plan_segments,
                                      sequential_plan, smallest_budget)


def step_seconds(model, plan, x, repeat):
    "Fastest forward + backward of mean(out^2), running `model` as `plan` says."
    best = math.inf
    for _ in range(repeat):
        for p in model.parameters(): p.grad = None
        t0 = time.perf_counter()
        checkpoint_sequential(model, plan, x, use_reentrant=False).square().mean().backward()
        best = min(best, time.perf_counter() - t0)
    return best


def experiment(model, x, repeat):
    a, c = measure(model, x, repeat=repeat)
    n = len(a)
    chunks = max(1, round(math.sqrt(n)))
    keep_all, sq = plan_cost(a, c, range(n)), sequential_plan(a, c, chunks)
    rows = [("keep everything", None, keep_all), (f"checkpoint_sequential, {chunks} chunks", None, sq)]
    for name, budget in [("plan, smallest budget", smallest_budget(a)),
                         ("plan, budget = sqrt(n) peak", sq.peak_bytes),
                         ("plan, half-way budget", (sq.peak_bytes + keep_all.peak_bytes) / 2)]:
        rows.append((name, budget, plan_segments(a, c, budget)))
    table = []
    for name, budget, plan in rows:
        kept, peak = plan_memory(model, plan, x)
        table.append(dict(name=name, budget=budget, model_peak=plan.peak_bytes, kept=kept, peak=peak,
                          recompute=plan.recompute_cost, step=step_seconds(model, plan, x, repeat), plan=plan))
    return table


def show(title, table):
    print(title)
    print(f"{'strategy':34} {'budget':>11} {'model peak':>11} {'kept':>11} {'peak':>11} {'recompute ms':>12} "
          f"{'step ms':>8} {'kept layers':>11}")
    for r in table:
        b = "" if r["budget"] is None else f"{r['budget']:,.0f}"
        print(f"{r['name']:34} {b:>11} {r['model_peak']:>11,.0f} {r['kept']:>11,} {r['peak']:>11,} "
              f"{r['recompute'] * 1e3:>12.2f} {r['step'] * 1e3:>8.2f} {len(r['plan'].stored):>11}")
    fits = all(r["budget"] is None or r["peak"] <= r["budget"] for r in table)
    same = next(r for r in table if r["name"].startswith("plan, budget = sqrt"))
    print(f"measured peak within budget for every plan: {fits}; at the sqrt(n) peak the plan recomputes "
          f"{same['recompute'] * 1e3:.2f} ms against {table[1]['recompute'] * 1e3:.2f} ms\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=32, help="MLP depth")
    ap.add_argument("--width", type=int, default=256, help="MLP width")
    ap.add_argument("--batch", type=int, default=256, help="batch size (both networks)")
    ap.add_argument("--repeat", type=int, default=3, help="timing repeats (the fastest is kept)")
    args = ap.parse_args()
    mytorch.manual_seed(0)
    f64 = mytorch.float64
    mlp = nn.Sequential(*[nn.Sequential(nn.Linear(args.width, args.width, dtype=f64), nn.ReLU())
                          for _ in range(args.blocks)])
    x = mytorch.randn(args.batch, args.width, dtype=f64)
    show(f"{args.blocks}-block MLP, width {args.width}, batch {args.batch}, float64", experiment(mlp, x, args.repeat))
    # the digits CNN of examples/digits_cnn.py, layer for layer, on inputs of the digits' shape
    cnn = nn.Sequential(
        Conv2d(1, 16, 3, padding=1, bias=False), BatchNorm2d(16), nn.ReLU(), MaxPool2d(2),
        Conv2d(16, 32, 3, padding=1, bias=False), BatchNorm2d(32), nn.ReLU(), MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 10))
    images = mytorch.randn(args.batch, 1, 8, 8)
    show(f"digits CNN (examples/digits_cnn.py), batch {args.batch}, float32", experiment(cnn, images, args.repeat))


if __name__ == "__main__":
    main()
