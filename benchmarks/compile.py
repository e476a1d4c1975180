"""Eager against compiled (mytorch.compile) forward + backward, beside PyTorch eager, with the tape's memory.

One thread, float64, everything measured in one run. Workloads: an MLP (5-21-21-5, tanh, cross-entropy) at batch
1, 32 and 256, and the chain of 1000 small elementwise ops of benchmarks/overhead.py. Times are the best of
several repeats, per forward + backward; the memory columns are `tape.stats()`: intermediate values and the
buffers they share, the tape's largest live set and the peak `tracemalloc` sees in one eager forward + backward.

    .venv/bin/python benchmarks/compile.py
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import timeit

import numpy as np
import mytorch
import mytorch.nn.functional as F

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # the table still prints, without the PyTorch column
    torch = None


def best(fn, number, repeat):
    "Best time per call, in microseconds."
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def mlp(lib):
    lib.manual_seed(0)
    d = lib.float64
    return lib.nn.Sequential(lib.nn.Linear(5, 21, dtype=d), lib.nn.Tanh(), lib.nn.Linear(21, 21, dtype=d),
                             lib.nn.Tanh(), lib.nn.Linear(21, 5, dtype=d))


def chain_fn(y):
    for _ in range(250):  # 4 ops per step
        y = (y * 1.0001 + 0.001).tanh() - 0.0001 * y
    return y.sum()


def workloads(rng):
    for batch in (1, 32, 256):
        x, y = rng.standard_normal((batch, 5)), rng.integers(0, 5, batch)
        def make(lib, compiled=False, x=x, y=y):
            model, xt, yt = mlp(lib), lib.tensor(x), lib.tensor(y)
            fn = lambda a, b: lib.nn.functional.cross_entropy(model(a), b)
            if compiled: fn = mytorch.compile(fn)
            params = list(model.parameters())
            def step():
                for p in params: p.grad = None
                fn(xt, yt).backward()
            return step, (lambda: mytorch.lower(lambda a, b: F.cross_entropy(model(a), b), xt, yt))
        yield f"MLP, batch {batch}", make, 200
    x0 = rng.standard_normal(4)
    def make_chain(lib, compiled=False):
        t = lib.tensor(x0, requires_grad=True)
        fn = mytorch.compile(chain_fn) if compiled else chain_fn
        def step():
            t.grad = None
            fn(t).backward()
        return step, (lambda: mytorch.lower(chain_fn, t))
    yield "chain of 1000 ops", make_chain, 3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timing repeats (best is kept)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}, 1 thread, float64,"
          f" forward + backward, best of {args.repeat}")
    print(f"\n{'workload':<19}{'eager µs':>10}{'compiled µs':>13}{'torch µs':>10}{'eager/compiled':>16}"
          f"{'compiled/torch':>16}{'values':>8}{'buffers':>9}{'tape peak B':>13}{'eager peak B':>14}")
    for name, make, number in workloads(rng):
        eager_step, _ = make(mytorch)
        comp_step, lowered = make(mytorch, compiled=True)
        t_e = best(eager_step, number, args.repeat)
        t_c = best(comp_step, number, args.repeat)
        t_t = best(make(torch)[0], number, args.repeat) if torch else float("nan")
        st = lowered().stats()
        print(f"{name:<19}{t_e:>10.1f}{t_c:>13.1f}{t_t:>10.1f}{t_e / t_c:>15.2f}x{t_c / t_t:>15.2f}x"
              f"{st['values']:>8}{st['buffers']:>9}{st['peak_bytes']:>13,}{st['eager_peak_bytes']:>14,}")
    print("\neager/compiled: how many times faster a replay is than MyTorch's eager mode; compiled/torch: the replay's"
          "\ntime over PyTorch eager's (below 1.0 is faster). values: intermediate values of the forward and backward;"
          "\nbuffers: the pooled arrays they share; tape peak: its largest live set; eager peak: tracemalloc's peak in"
          "\none eager forward + backward.")


if __name__ == "__main__":
    main()
