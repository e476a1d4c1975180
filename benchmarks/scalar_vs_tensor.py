"""Why the tensor engine exists: the same MLP trained by the scalar engine and by the tensor engine.

One training step (forward, backward, SGD update) of 2-16-16-1 at batch 8 and 256 and of
2-64-64-1 at batch 64, with the time per step and the number of graph nodes each engine builds:

    .venv/bin/python benchmarks/scalar_vs_tensor.py
"""
import random
import time

import numpy as np
import mytorch
from mytorch.scalar import Value, _topological_order
from mytorch.scalar_nn import MLP


def scalar_step(model, X, y, lr=0.05):
    preds = [model([Value(a), Value(b)]) for a, b in X]
    loss = sum((p - t) ** 2 for p, t in zip(preds, y)) * (1.0 / len(X))
    model.zero_grad()
    loss.backward()
    for p in model.parameters(): p.data -= lr * p.grad
    return loss, len(_topological_order(loss))


def tensor_params(model):
    "The scalar model's weights as tensors (W: in x out, b: 1 x out), so both engines start equal."
    ps = []
    for layer in model.layers:
        W = np.array([[w.data for w in n.w] for n in layer.neurons]).T
        b = np.array([[n.b.data for n in layer.neurons]])
        ps += [mytorch.tensor(W, requires_grad=True), mytorch.tensor(b, requires_grad=True)]
    return ps


def tensor_step(ps, X, y, lr=0.05):
    h = mytorch.tensor(X)
    for i in range(0, len(ps), 2):
        h = h @ ps[i] + ps[i + 1]
        if i + 2 < len(ps): h = h.relu()
    loss = ((h.reshape(-1) - mytorch.tensor(y)) ** 2).mean()
    for p in ps: p.grad = None
    loss.backward()
    with mytorch.no_grad():
        for p in ps: p.sub_(lr * p.grad)
    return loss, count_nodes(loss)


def count_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen or not hasattr(n, "edges"): continue
        seen.add(n)
        stack.extend(e[0] for e in n.edges if e is not None)
    return len(seen)


def timed(step, *args, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter(); out = step(*args); best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    rng = np.random.default_rng(0)
    print(f"{'network, batch':<24}{'scalar ms':>11}{'tensor ms':>11}{'speedup':>9}{'scalar nodes':>14}{'tensor nodes':>14}{'same loss':>11}")
    for sizes, batch, repeat in (([16, 16, 1], 8, 3), ([16, 16, 1], 256, 1), ([64, 64, 1], 64, 1)):
        X, y = rng.standard_normal((batch, 2)), rng.standard_normal(batch)
        model = MLP(2, sizes, act='relu', rng=random.Random(0))
        ps = tensor_params(model)
        ts, (tl, tn) = timed(tensor_step, ps, X, y, repeat=1)    # first, from the same starting weights
        ss, (sl, sn) = timed(scalar_step, model, X.tolist(), y.tolist(), repeat=1)
        same = abs(sl.data - tl.item()) < 1e-9
        if repeat > 1:
            ss = min(ss, timed(scalar_step, model, X.tolist(), y.tolist(), repeat=repeat - 1)[0])
            ts = min(ts, timed(tensor_step, ps, X, y, repeat=repeat - 1)[0])
        name = f"2-{'-'.join(map(str, sizes))}, batch {batch}"
        print(f"{name:<24}{ss * 1e3:>11.1f}{ts * 1e3:>11.2f}{ss / ts:>8.0f}x{sn:>14,}{tn:>14,}{str(same):>11}")
    print("\nOne SGD step each (forward, backward, update), best of the repeats; the tensor engine's node count"
          " does not grow with the batch.")


if __name__ == "__main__":
    main()
