"""conv2d forward and forward+backward against PyTorch's CPU convolution, in one run.

The two layers of a small MNIST-sized CNN, 3x3 kernels with padding 1, batch 32, float64, one
thread: 1->8 channels on 28x28 and 8->16 channels on 14x14. Forward+backward computes the
gradients of the input, the weight and the bias in both frameworks. The two frameworks are
timed in alternation (best of --repeat rounds each), so a busy machine slows both alike, and
by the CPU time of the calling thread (both compute in it at one thread), which leaves out the
time other processes hold the core; --wall times by the clock instead:

    .venv/bin/python benchmarks/conv.py
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
from mytorch.nn.conv import conv2d

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None

CASES = (("conv2d 1->8, 28x28, batch 32", 32, 1, 8, 28),
         ("conv2d 8->16, 14x14, batch 32", 32, 8, 16, 14))


def steps(lib, conv, x, w, b, g):
    "The forward and the forward+backward step of `lib` on copies of the same arrays."
    xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
    gt = lib.tensor(g)
    def forward():
        with lib.no_grad(): conv(xt, wt, bt, padding=1)
    def forward_backward():
        xt.grad = wt.grad = bt.grad = None
        conv(xt, wt, bt, padding=1).backward(gt)
    return forward, forward_backward


def page_faults(f, n:int=20) -> float:
    "Minor page faults per call: the cost of touching freshly allocated memory, which some machines make dear."
    f()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n): f()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30, help="rounds; the best round of each framework is kept")
    ap.add_argument("--number", type=int, default=10, help="calls per round")
    ap.add_argument("--wall", action="store_true", help="time by the wall clock, not the thread's CPU time")
    args = ap.parse_args()
    timer = time.perf_counter if args.wall else time.thread_time
    if torch is None:
        print("torch is not installed: nothing to compare against (pip install torch, or make bench).")
        return
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}, torch {torch.__version__}, 1 thread, float64, 3x3 kernels, padding 1, "
          f"{'wall-clock' if args.wall else 'thread CPU'} time, best of {args.repeat} rounds of {args.number} calls\n")
    print(f"{'case':<32}{'step':<18}{'torch ms':>10}{'mytorch ms':>12}{'ratio':>8}  {'verdict':<8}"
          f"{'faults torch/mytorch':>22}")
    worst = 0.0
    for label, N, C, O, H in CASES:
        x, g = rng.standard_normal((N, C, H, H)), rng.standard_normal((N, O, H, H))
        w, b = rng.standard_normal((O, C, 3, 3)) / 3.0, rng.standard_normal(O)
        t_steps = steps(torch, torch.nn.functional.conv2d, x, w, b, g)
        m_steps = steps(mytorch, conv2d, x, w, b, g)
        for name, ft, fm in zip(("forward", "forward+backward"), t_steps, m_steps):
            ft(); fm()
            best = {"torch": float("inf"), "mytorch": float("inf")}
            for _ in range(args.repeat):   # alternate, so that load on the machine hits both
                for lib, f in (("torch", ft), ("mytorch", fm)):
                    ms = timeit.Timer(f, timer=timer).timeit(number=args.number) / args.number * 1e3
                    best[lib] = min(best[lib], ms)
            ratio = best["mytorch"] / best["torch"]
            if name == "forward+backward": worst = max(worst, ratio)
            faults = f"{page_faults(ft):.0f} / {page_faults(fm):.0f}"
            print(f"{label:<32}{name:<18}{best['torch']:>10.3f}{best['mytorch']:>12.3f}{ratio:>7.2f}x  "
                  f"{'win' if ratio <= 1.0 else 'LOSS':<8}{faults:>22}")
    print(f"\nratio: mytorch's time divided by torch's (below 1.0 is faster); the slowest forward+backward "
          f"here is {worst:.2f}x.")


if __name__ == "__main__":
    main()
