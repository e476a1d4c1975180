"""One training step of a small CNN (forward, cross-entropy, backward, optimizer step) against PyTorch.

Two networks of the Conv-BatchNorm-ReLU-MaxPool kind, float64, one thread, batch 64, measured
in one run, with the same weights in both frameworks (PyTorch's are copied in through the state
dict, so the two compute the same numbers, and the script checks that they do):

- MNIST-sized, 1x28x28 inputs: Conv(1->8, 3x3, padding 1)-BN-ReLU-MaxPool(2), then
  Conv(8->16)-BN-ReLU-MaxPool(2), then Linear(784->10); the two convolutions are those of
  benchmarks/conv.py. The case the table leads with.
- the same MNIST-sized network without its BatchNorm layers it separates what the
  convolution and pooling layers cost from what batch normalization costs.
- digits-sized, 1x8x8 inputs: the network of examples/digits_cnn.py (1->16->32 channels, then
  Linear(128->32)-ReLU-Linear(32->10)), where the per-op overhead weighs more.

A step is `opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()` with SGD (momentum
0.9) by default or Adam (--optim adam). The two frameworks are timed in alternation (best of
--repeat rounds each), so that load on the machine hits both, and by the CPU time of the
calling thread (both compute in it at one thread), which leaves out the time other processes
hold the core; --wall times by the clock instead. The minor page faults per step are printed
too: both frameworks allocate their arrays with malloc, and on a virtual machine a fault can
cost microseconds, so a run in which the C allocator returns memory to the system and maps it
again is slower for reasons that are not the framework's arithmetic:

    .venv/bin/python benchmarks/cnn_step.py
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import resource
import time
import timeit

import numpy as np
import mytorch
import mytorch.kernels
import mytorch.nn.conv      # importing a module registers its compiled kernels, for the header line
import mytorch.nn.pooling
import mytorch.nn.normalization
import mytorch.optim

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None

BATCH = 64


def mnist_cnn(lib):
    "1x28x28 -> 8x14x14 -> 16x7x7 -> 10 scores."
    m = lib.nn
    return m.Sequential(
        m.Conv2d(1, 8, 3, padding=1, bias=False, dtype=lib.float64), m.BatchNorm2d(8, dtype=lib.float64), m.ReLU(),
        m.MaxPool2d(2),
        m.Conv2d(8, 16, 3, padding=1, bias=False, dtype=lib.float64), m.BatchNorm2d(16, dtype=lib.float64), m.ReLU(),
        m.MaxPool2d(2),
        m.Flatten(), m.Linear(16 * 7 * 7, 10, dtype=lib.float64))


def mnist_cnn_without_bn(lib):
    "mnist_cnn without its BatchNorm layers."
    m = lib.nn
    return m.Sequential(
        m.Conv2d(1, 8, 3, padding=1, bias=False, dtype=lib.float64), m.ReLU(), m.MaxPool2d(2),
        m.Conv2d(8, 16, 3, padding=1, bias=False, dtype=lib.float64), m.ReLU(), m.MaxPool2d(2),
        m.Flatten(), m.Linear(16 * 7 * 7, 10, dtype=lib.float64))


def digits_cnn(lib):
    "1x8x8 -> 16x4x4 -> 32x2x2 -> 10 scores: examples/digits_cnn.py's network."
    m = lib.nn
    return m.Sequential(
        m.Conv2d(1, 16, 3, padding=1, bias=False, dtype=lib.float64), m.BatchNorm2d(16, dtype=lib.float64), m.ReLU(),
        m.MaxPool2d(2),
        m.Conv2d(16, 32, 3, padding=1, bias=False, dtype=lib.float64), m.BatchNorm2d(32, dtype=lib.float64), m.ReLU(),
        m.MaxPool2d(2),
        m.Flatten(), m.Linear(128, 32, dtype=lib.float64), m.ReLU(), m.Linear(32, 10, dtype=lib.float64))


def make_step(lib, model, x, y, which):
    "A function doing one training step of `model` on (x, y), and a function returning the last loss."
    opt = (lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if which == "sgd"
           else lib.optim.Adam(model.parameters(), lr=1e-3))
    loss_fn = lib.nn.CrossEntropyLoss()
    xt, yt = lib.tensor(x), lib.tensor(y)
    last = [None]
    def step():
        opt.zero_grad()
        loss = loss_fn(model(xt), yt)
        loss.backward()
        opt.step()
        last[0] = loss
    return step, lambda: float(last[0].item())


def same_weights(ours, theirs):
    "Copy the torch model's parameters and buffers into ours, so that both compute the same step."
    ours.load_state_dict({k: mytorch.tensor(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()})


def best_ms(fns, repeat, number, timer):
    "Best time per call of each function, in ms, timing them in turn `repeat` times."
    for f in fns: f()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, f in enumerate(fns): times[k].append(timeit.Timer(f, timer=timer).timeit(number=number) / number)
    return [min(t) * 1e3 for t in times]


def page_faults(f, n:int=5) -> float:
    "Minor page faults per call of f."
    f()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n): f()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="rounds; the best round of each framework is kept")
    ap.add_argument("--number", type=int, default=5, help="steps per round")
    ap.add_argument("--optim", choices=("sgd", "adam"), default="sgd")
    ap.add_argument("--wall", action="store_true", help="time by the wall clock, not the thread's CPU time")
    args = ap.parse_args(argv)
    timer = time.perf_counter if args.wall else time.thread_time
    if torch is None:
        print("torch is not installed: nothing to compare against (pip install torch, or make bench).")
        return
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    kernels = ", ".join(f"{k} {mytorch.kernels.kernel_backend(k).split(' (')[0]}" for k in mytorch.kernels._registry)
    print(f"numpy {np.__version__}, torch {torch.__version__}, 1 thread, float64, batch {BATCH}, "
          f"{'SGD (momentum 0.9)' if args.optim == 'sgd' else 'Adam'}, best of {args.repeat} rounds of "
          f"{args.number} steps, {'wall-clock' if args.wall else 'thread CPU'} time\nkernels: {kernels}\n")
    print(f"{'network':<38}{'params':>8}{'mytorch ms':>12}{'torch ms':>10}{'ratio':>8}"
          f"{'faults mytorch/torch':>23}")
    for label, build, side, target in (("CNN 1x28x28 (benchmarks/conv.py)", mnist_cnn, 28, 1.0),
                                       ("  the same without BatchNorm", mnist_cnn_without_bn, 28, None),
                                       ("CNN 1x8x8 (examples/digits_cnn.py)", digits_cnn, 8, None)):
        x, y = rng.standard_normal((BATCH, 1, side, side)), rng.integers(0, 10, BATCH)
        theirs, ours = build(torch), build(mytorch)
        same_weights(ours, theirs)
        m_step, m_loss = make_step(mytorch, ours, x, y, args.optim)
        t_step, t_loss = make_step(torch, theirs, x, y, args.optim)
        m_step(); t_step()     # the first step from the same weights: the same loss
        if not np.isclose(m_loss(), t_loss(), rtol=1e-9):
            raise SystemExit(f"{label}: the first losses differ (mytorch {m_loss()!r}, torch {t_loss()!r}); "
                             "the two models do not compute the same step, so timing them would compare different work.")
        ms = best_ms([m_step, t_step], args.repeat, args.number, timer)
        faults = f"{page_faults(m_step):.0f} / {page_faults(t_step):.0f}"
        ratio = ms[0] / ms[1]
        n = sum(p.numel() for p in ours.parameters())
        print(f"{label:<38}{n:>8,}{ms[0]:>12.3f}{ms[1]:>10.3f}{ratio:>7.2f}x"
              f"{faults:>24}")
    print("\nratio: mytorch's time divided by PyTorch's (below 1.0 is faster).")


if __name__ == "__main__":
    main()
