"""Per-op overhead of the tensor engine against PyTorch (CPU) and a hand-written NumPy baseline.

Everything is measured in one run, on one thread, in float64, as forward + backward, and
reported as ratios, since absolute times on a shared machine mean little:

    .venv/bin/python benchmarks/overhead.py

The NumPy baseline computes the same forward values and gradients with no graph at all: it is
the floor a Python autograd engine can approach, not beat.
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import timeit

import numpy as np
import mytorch

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # the table still prints, without the PyTorch column
    torch = None


def best(fn, number, repeat):
    "Best time per call, in microseconds."
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def cases(rng):
    a11, b11 = rng.standard_normal((1, 1)), rng.standard_normal((1, 1))
    m32 = rng.standard_normal((32, 32)), rng.standard_normal((32, 32))
    m256 = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    e256 = rng.standard_normal((256, 256))
    chain_x = rng.standard_normal(4)

    def mt_binary(op, a, b):
        ta, tb = mytorch.tensor(a, requires_grad=True), mytorch.tensor(b, requires_grad=True)
        g = mytorch.ones_like(op(ta, tb))
        def run():
            ta.grad = tb.grad = None
            op(ta, tb).backward(g)
        return run

    def th_binary(op, a, b):
        ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        g = torch.ones_like(op(ta, tb))
        def run():
            ta.grad = tb.grad = None
            op(ta, tb).backward(g)
        return run

    def np_add(a, b):
        def run():
            c = a + b; g = np.ones_like(c)
            return g, g
        return run

    def np_matmul(a, b):
        def run():
            c = a @ b; g = np.ones_like(c)
            return g @ b.T, a.T @ g
        return run

    def mt_exp(a):
        t = mytorch.tensor(a, requires_grad=True); g = mytorch.ones_like(t)
        def run():
            t.grad = None
            t.exp().backward(g)
        return run

    def th_exp(a):
        t = torch.tensor(a, requires_grad=True); g = torch.ones_like(t)
        def run():
            t.grad = None
            t.exp().backward(g)
        return run

    def np_exp(a):
        def run():
            y = np.exp(a); g = np.ones_like(y)
            return g * y
        return run

    def chain(lib, x0):
        t = lib.tensor(x0, requires_grad=True)
        def run():
            t.grad = None
            y = t
            for i in range(250):  # 4 ops per step: 1000 ops
                y = (y * 1.0001 + 0.001).tanh() - 0.0001 * y
            y.sum().backward()
        return run

    def np_chain(x0):
        def run():
            ys, y = [], x0
            for i in range(250):
                a = y * 1.0001 + 0.001; t = np.tanh(a); ys.append((y, t)); y = t - 0.0001 * y
            g = np.ones_like(y)
            for y_prev, t in reversed(ys):
                g = g * (1 - t * t) * 1.0001 - 0.0001 * g
            return g
        return run

    add, mm = (lambda a, b: a + b), (lambda a, b: a @ b)
    yield "add 1x1", 1, mt_binary(add, a11, b11), torch and th_binary(add, a11, b11), np_add(a11, b11), 2000
    yield "matmul 32x32", 1, mt_binary(mm, *m32), torch and th_binary(mm, *m32), np_matmul(*m32), 500
    yield "matmul 256x256", 1, mt_binary(mm, *m256), torch and th_binary(mm, *m256), np_matmul(*m256), 10
    yield "exp 256x256", 1, mt_exp(e256), torch and th_exp(e256), np_exp(e256), 50
    yield "chain of 1000 ops", 1000, chain(mytorch, chain_x), torch and chain(torch, chain_x), np_chain(chain_x), 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timing repeats (best is kept)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}, 1 thread, float64,"
          f" forward + backward, best of {args.repeat}")
    print(f"\n{'case':<20}{'mytorch µs':>12}{'torch µs':>11}{'numpy µs':>11}{'vs torch':>10}{'vs numpy':>10}")
    for name, per, mt, th, npb, number in cases(rng):
        t_mt = best(mt, number, args.repeat) / per
        t_th = best(th, number, args.repeat) / per if th else float("nan")
        t_np = best(npb, number, args.repeat) / per
        unit = " per op" if per > 1 else ""
        print(f"{name:<20}{t_mt:>12.2f}{t_th:>11.2f}{t_np:>11.2f}{t_mt / t_th:>9.2f}x{t_mt / t_np:>9.2f}x{unit}")
    print("\nvs torch / vs numpy: mytorch's time divided by theirs (below 1.0 is faster).")


if __name__ == "__main__":
    main()
