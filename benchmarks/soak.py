"""A soak test: does memory stay flat over many training steps?

Two trainings with mytorch.nn, one thread, float32, through `Trainer.fit` (zero_grad, forward,
cross-entropy, backward, Adam step) with a `Run` that logs every step, over 100 fixed random
batches, so that the engine, the loop and the run record are all soaked:

- an MLP (32-64-64-10, ReLU, batch 32) for 10,000 steps, a row every 1,000;
- a small CNN (1x16x16 inputs: Conv(1->8, 3x3)-ReLU-MaxPool(2)-Conv(8->16)-ReLU-MaxPool(2)-
  Linear(256->10), batch 16) for 1,000 steps, a row every 100.

Each row gives the resident set size (RSS, from /proc/self/statm; where that file does not
exist, the peak RSS from getrusage, which can only grow), its change since the first row, the
number of live mytorch tensors (a graph or a saved tensor kept by mistake shows here first),
and the time per step over the rows' interval. The first row is taken after one step, so that
the allocations of the first step (parameters, optimizer state, caches) are not counted as
growth. The summary gives the growth from the first row to the last, and over the second half
alone, where a leak keeps growing and a warm-up does not:

    .venv/bin/python benchmarks/soak.py
    .venv/bin/python benchmarks/soak.py --mlp-steps 2000 --cnn-steps 200     # shorter
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import gc
import resource
import sys
import tempfile
import time
from pathlib import Path

import mytorch
import mytorch.nn as nn
from mytorch import Tensor
from mytorch.optim import Adam
from mytorch.training import Run, Trainer

PAGE = os.sysconf('SC_PAGE_SIZE') if hasattr(os, 'sysconf') else 4096


def rss_mb() -> float:
    "The resident set size now, in MB (/proc/self/statm), or the peak RSS where there is no such file."
    try:
        with open('/proc/self/statm') as f: return int(f.read().split()[1]) * PAGE / 2**20
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == 'darwin' else peak / 2**10    # bytes on macOS, KiB on Linux


RSS_SOURCE = 'current, /proc/self/statm' if os.path.exists('/proc/self/statm') else 'PEAK, getrusage (no /proc/self/statm)'


def live_tensors() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Tensor))


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(16 * 4 * 4, 10))


class Soak(Trainer):
    "A Trainer that prints a row of measurements every `every` optimizer steps (and after the first)."
    def __init__(self, *args, every:int, **kw):
        super().__init__(*args, **kw)
        self.every, self.rows, self.t0 = every, [], None

    def unpack_batch(self, batch):      # called before each batch: self.step optimizer steps are done
        if self.step == 1 or (self.step and self.step % self.every == 0 and self.rows[-1][0] != self.step): self.row()
        return super().unpack_batch(batch)

    def row(self):
        now = time.perf_counter()
        ms = None if self.t0 is None else (now - self.t0) / (self.step - self.rows[-1][0]) * 1e3
        gc.collect()
        self.rows.append((self.step, rss_mb(), live_tensors()))
        step, rss, tensors = self.rows[-1]
        print(f"{step:>8,}{rss:>10.1f}{rss - self.rows[0][1]:>+11.2f}{tensors:>14,}{'-' if ms is None else f'{ms:.2f}':>10}"
              f"{self.history['train_loss'][-1] if self.history else float('nan'):>12.4f}", flush=True)
        self.t0 = time.perf_counter()


def soak(name, model, shape, steps, every, run_dir, n_batches=100):
    "Train `model` with Trainer.fit for `steps` steps over `n_batches` fixed random batches of `shape`, with a Run."
    g = mytorch.Generator().manual_seed(0)
    batches = [(mytorch.randn(*shape, generator=g), mytorch.randint(0, 10, (shape[0],), generator=g))
               for _ in range(n_batches)]
    trainer = Soak(model, nn.CrossEntropyLoss(), Adam(model.parameters(), lr=1e-3), every=every)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"\n{name}: {n_params:,} parameters, batch {shape[0]}, {steps:,} steps ({steps // n_batches} epochs of "
          f"{n_batches} batches), a Run entry per step")
    print(f"{'step':>8}{'RSS MB':>10}{'change MB':>11}{'live tensors':>14}{'ms/step':>10}{'epoch loss':>12}")
    with Run(run_dir / name.split()[0], config={'model': name, 'steps': steps}) as run:
        trainer.fit(batches, steps // n_batches, run=run)
    trainer.row()
    rows = trainer.rows
    (s0, m0, _), (s1, m1, _) = rows[0], rows[-1]
    half = min(rows, key=lambda r: abs(r[0] - steps // 2))
    print(f"growth: {m1 - m0:+.2f} MB from step {s0:,} to {s1:,}; {m1 - half[1]:+.2f} MB over the second half "
          f"(steps {half[0]:,} to {s1:,}); live tensors {rows[0][2]:,} -> {rows[-1][2]:,}; "
          f"the run logged {len(Run.load(run.dir).metrics):,} entries")
    return m1 - m0, m1 - half[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlp-steps", type=int, default=10_000)
    ap.add_argument("--cnn-steps", type=int, default=1_000)
    args = ap.parse_args()
    mytorch.manual_seed(0)
    print(f"mytorch {mytorch.__version__}, 1 thread, float32, Adam; RSS: {RSS_SOURCE}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='mytorch-soak-') as tmp:
        results = {'MLP': soak("MLP 32-64-64-10", mlp(), (32, 32), args.mlp_steps, max(1, args.mlp_steps // 10), Path(tmp)),
                   'CNN': soak("CNN 1x16x16 -> 8 -> 16 -> 10", cnn(), (16, 1, 16, 16), args.cnn_steps,
                               max(1, args.cnn_steps // 10), Path(tmp))}
    print(f"\n{'model':<6}{'growth MB':>11}{'second half MB':>16}")
    for k, (total, second) in results.items(): print(f"{k:<6}{total:>+11.2f}{second:>+16.2f}")
    print(f"\ntotal time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
