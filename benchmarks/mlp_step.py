"""One MLP training step (forward, cross-entropy, backward, Adam) against PyTorch and NumPy.

Two sizes, float64, one thread, measured in one run: a small network (5-21-21-5 tanh, 698
parameters, batch 32), where the per-op overhead dominates, and a large one (1024-1024-1024-10
ReLU, 2.1M parameters, batch 64), where the arithmetic does. The NumPy column is the same step
written by hand with no graph, the floor for any NumPy-backed engine. The header says which
implementation of Adam's update ran (`adam_update`); `MYTORCH_KERNELS=numpy` runs its NumPy
reference instead:

    .venv/bin/python benchmarks/mlp_step.py
    MYTORCH_KERNELS=numpy .venv/bin/python benchmarks/mlp_step.py
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import timeit

import numpy as np
import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
from mytorch.kernels import kernel_backend

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None


def mlp(lib, sizes, act):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(lib.nn.Linear(a, b, dtype=lib.float64))
        if i < len(sizes) - 2: layers.append(act(lib))
    return lib.nn.Sequential(*layers)


def framework_step(lib, sizes, act, x, y):
    model = mlp(lib, sizes, act)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = lib.nn.CrossEntropyLoss()
    xt, yt = lib.tensor(x), lib.tensor(y)
    def step():
        opt.zero_grad()
        loss_fn(model(xt), yt).backward()
        opt.step()
    return step, sum(p.numel() for p in model.parameters())


def numpy_step(sizes, relu, x, y, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    rng = np.random.default_rng(0)
    Ws = [rng.uniform(-1, 1, (a, b)) / np.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    bs = [np.zeros(b) for b in sizes[1:]]
    params = Ws + bs
    m = [np.zeros_like(p) for p in params]; v = [np.zeros_like(p) for p in params]
    t = [0]
    onehot = np.eye(sizes[-1])[y]
    def step():
        hs, h = [x], x
        for i, (W, b) in enumerate(zip(Ws, bs)):
            h = h @ W + b
            if i < len(Ws) - 1: h = np.maximum(h, 0) if relu else np.tanh(h)
            hs.append(h)
        z = h - h.max(1, keepdims=True); p = np.exp(z); p /= p.sum(1, keepdims=True)
        g = (p - onehot) / len(x)
        grads_W, grads_b = [None] * len(Ws), [None] * len(Ws)
        for i in reversed(range(len(Ws))):
            grads_W[i], grads_b[i] = hs[i].T @ g, g.sum(0)
            if i:
                g = g @ Ws[i].T
                g = g * (hs[i] > 0) if relu else g * (1 - hs[i] ** 2)
        t[0] += 1
        c1, c2 = 1 - b1 ** t[0], 1 - b2 ** t[0]
        for k, (p_, g_) in enumerate(zip(params, grads_W + grads_b)):
            m[k] *= b1; m[k] += (1 - b1) * g_
            v[k] *= b2; v[k] += (1 - b2) * g_ * g_
            p_ -= lr * (m[k] / c1) / (np.sqrt(v[k] / c2) + eps)
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    mytorch.manual_seed(0)
    if torch: torch.manual_seed(0)
    tanh, relu = (lambda lib: lib.nn.Tanh()), (lambda lib: lib.nn.ReLU())
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}, 1 thread, float64, Adam, "
          f"best of {args.repeat}; adam_update: {kernel_backend('adam_update')}\n")
    print(f"{'network':<34}{'params':>10}{'mytorch ms':>12}{'torch ms':>10}{'numpy ms':>10}{'vs torch':>10}{'vs numpy':>10}")
    for label, sizes, act, is_relu, batch, number in (
            ("5-21-21-5 tanh, batch 32", (5, 21, 21, 5), tanh, False, 32, 200),
            ("1024-1024-1024-10 relu, batch 64", (1024, 1024, 1024, 10), relu, True, 64, 3)):
        x, y = rng.standard_normal((batch, sizes[0])), rng.integers(0, sizes[-1], batch)
        m_step, n = framework_step(mytorch, sizes, act, x, y)
        times = {"mytorch": m_step}
        if torch: times["torch"] = framework_step(torch, sizes, act, x, y)[0]
        times["numpy"] = numpy_step(sizes, is_relu, x, y)
        best = {}
        for k, f in times.items():
            f()
            best[k] = min(timeit.repeat(f, number=number, repeat=args.repeat)) / number * 1e3
        t_t = best.get("torch", float("nan"))
        print(f"{label:<34}{n:>10,}{best['mytorch']:>12.3f}{t_t:>10.3f}{best['numpy']:>10.3f}"
              f"{best['mytorch'] / t_t:>9.2f}x{best['mytorch'] / best['numpy']:>9.2f}x")
    print("\nvs torch / vs numpy: mytorch's time divided by theirs (below 1.0 is faster).")


if __name__ == "__main__":
    main()
