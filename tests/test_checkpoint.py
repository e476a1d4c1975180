"""Saved-tensor hooks, activation checkpointing and the exact checkpoint planner (chapters 41 and 42).

The planner is checked against exhaustive search over all 2^n plans for random chains of up to 12
layers; checkpoint, checkpoint_sequential and saved_tensors_hooks against PyTorch.
"""
import gc
import math
import random
import warnings
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mytorch
import mytorch.nn as nn
from mytorch.engine import tensor, float64, grad
from mytorch.autograd.graph import saved_tensors_hooks, saved_bytes, count_saved
from mytorch.utils import checkpoint as ckpt_module
from mytorch.utils.checkpoint import (CheckpointError, checkpoint, checkpoint_sequential, measure, plan_cost,
                                      plan_memory, plan_segments, sequential_plan, smallest_budget)

try:
    import torch
    import torch.utils.checkpoint as tcp
except ImportError:   # the planner's tests run without PyTorch; the parity tests are skipped
    torch = tcp = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is the reference here")


# ---------------------------------------------------------------- the planner

def exhaustive(a, c, budget):
    "The least (recompute cost, peak) over all 2^n plans whose peak fits the budget, or None; and the least peak."
    best, least = None, math.inf
    for m in range(1 << len(a)):
        p = plan_cost(a, c, [i for i in range(len(a)) if m >> i & 1])
        least = min(least, p.peak_bytes)
        if p.peak_bytes <= budget and (best is None or (p.recompute_cost, p.peak_bytes) < best):
            best = (p.recompute_cost, p.peak_bytes)
    return best, least


def planned(a, c, budget):
    try: p = plan_segments(a, c, budget)
    except ValueError: return None
    assert p.peak_bytes <= budget
    assert (p.recompute_cost, p.peak_bytes) == (plan_cost(a, c, p.stored).recompute_cost, plan_cost(a, c, p.stored).peak_bytes)
    return p.recompute_cost, p.peak_bytes


def test_plan_segments_equals_exhaustive_search_up_to_12_layers():
    rng = random.Random(14)
    for trial in range(160):
        n = rng.randint(0, 12) if trial >= 24 else rng.randint(10, 12)   # the first two dozen at full size
        a = [rng.randint(0, 40) for _ in range(n)]
        c = [rng.randint(0, 12) for _ in range(n)]
        budget = rng.randint(0, sum(a) + 5)
        want, least = exhaustive(a, c, budget)
        assert planned(a, c, budget) == want, (a, c, budget)
        assert smallest_budget(a) == least


def test_plan_segments_with_real_valued_costs():
    rng = np.random.default_rng(15)
    for _ in range(40):
        n = int(rng.integers(1, 10))
        a = [float(v) for v in rng.uniform(0, 1000, n)]
        c = [float(v) for v in rng.uniform(0, 1, n)]
        budget = float(rng.uniform(0, sum(a)))
        want, _ = exhaustive(a, c, budget)
        got = planned(a, c, budget)
        assert (got is None) == (want is None)
        if got is not None:   # sums taken in another order may differ in the last bits
            assert math.isclose(got[0], want[0], rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 6)), max_size=8), st.integers(0, 120))
def test_plan_segments_property(layers, budget):
    a, c = [x for x, _ in layers], [y for _, y in layers]
    assert planned(a, c, budget) == exhaustive(a, c, budget)[0]


def test_refusal_names_the_smallest_budget():
    a, c = [5, 9, 2, 7, 7, 1, 4], [1] * 7
    least = exhaustive(a, c, math.inf)[1]
    with pytest.raises(ValueError, match=f"at least {least}"):
        plan_segments(a, c, least - 1)
    assert plan_segments(a, c, least).peak_bytes == least


def test_plan_segments_argument_errors():
    with pytest.raises(ValueError, match="act_bytes has 2 entries and compute_costs 1"):
        plan_segments([1, 2], [1], 10)
    with pytest.raises(ValueError, match=r"act_bytes\[1\] is -3"):
        plan_segments([1, -3], [1, 1], 10)
    with pytest.raises(ValueError, match=r"compute_costs\[0\] is nan"):
        plan_segments([1], [float('nan')], 10)
    with pytest.raises(ValueError, match="budget must be a number"):
        plan_segments([1], [1], None)
    with pytest.raises(ValueError, match="must lie in 0..2"):
        plan_cost([1, 1, 1], [1, 1, 1], [3])


def test_plan_shape_and_sequential_plan():
    p = plan_cost([1] * 7, [2] * 7, [1, 4])
    assert (p.stored, p.segments, p.peak_bytes, p.recompute_cost) == ((1, 4), [(0, 1), (2, 4), (5, 7)], 4, 10)
    sq = sequential_plan([1] * 10, [1] * 10, 3)
    assert sq.segments == [(0, 2), (3, 5)] and sq.stored == (2, 5, 6, 7, 8, 9)
    assert plan_segments([1] * 10, [1] * 10, sq.peak_bytes).recompute_cost <= sq.recompute_cost


# ---------------------------------------------------------------- hooks

def _mlp(lib, blocks=4, width=8, seed=0):
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((width, width)) / 3, rng.standard_normal(width)) for _ in range(blocks)]
    if lib is torch:
        layers = []
        for w, b in ws:
            lin = torch.nn.Linear(width, width).double()
            with torch.no_grad(): lin.weight.copy_(torch.from_numpy(w)); lin.bias.copy_(torch.from_numpy(b))
            layers += [lin, torch.nn.ReLU()]
        return torch.nn.Sequential(*layers)
    layers = []
    for w, b in ws:
        lin = nn.Linear(width, width, dtype=float64)
        lin.weight._data[...] = w; lin.bias._data[...] = b
        layers += [lin, nn.ReLU()]
    return nn.Sequential(*layers)


def _grads(lib, model, x, run):
    for p in model.parameters(): p.grad = None
    xx = (torch.from_numpy(x.copy()) if lib is torch else tensor(x.copy())).requires_grad_()
    run(xx).square().mean().backward()
    return [p.grad.numpy().copy() for p in model.parameters()] + [xx.grad.numpy().copy()]


def _worst(a, b): return max(float(np.abs(u - v).max()) for u, v in zip(a, b))


X = np.random.default_rng(1).standard_normal((5, 8))


@needs_torch
def test_saved_bytes_equal_pytorch_count():
    ours, theirs = _mlp(mytorch), _mlp(torch)
    tx = torch.from_numpy(X)
    alive = {p.untyped_storage().data_ptr() for p in theirs.parameters()} | {tx.untyped_storage().data_ptr()}
    seen = {}
    def count(t):
        s = t.untyped_storage()
        if s.data_ptr() not in alive: seen[s.data_ptr()] = s.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(count, lambda t: t): theirs(tx)
    assert saved_bytes(ours, tensor(X)) == sum(seen.values()) == 4 * X.size * 8


def test_hooks_see_plain_attribute_arrays_of_compiled_ops():
    "Conv, pooling, batch norm, LSTM, GELU, cross-entropy: everything kept is packed, and gradients are unchanged."
    mytorch.manual_seed(3)
    conv = nn.Sequential(mytorch.nn.conv.Conv2d(2, 3, 3, padding=1, dtype=float64),
                         mytorch.nn.normalization.BatchNorm2d(3, dtype=float64), nn.GELU(),
                         mytorch.nn.pooling.MaxPool2d(2), nn.Flatten())
    lstm = nn.LSTM(3, 4, dtype=float64)
    img = mytorch.randn(2, 2, 4, 4, dtype=float64)
    seq = mytorch.randn(5, 2, 3, dtype=float64)
    target = tensor(np.array([1, 0]))
    def loss():
        return nn.functional.cross_entropy(conv(img)[:, :4] + lstm(seq)[0][-1], target)
    params = list(conv.parameters()) + list(lstm.parameters())
    plain = [g.numpy() for g in grad(loss(), params)]
    nodes, packed = [], []
    def pack(t):
        packed.append(t)
        return t.detach().numpy().copy()   # a copy: what comes back is what was packed
    with saved_tensors_hooks(pack, lambda a: tensor(a)):
        out = loss()
    node, seen = out.grad_fn, set()
    stack = [node]
    while stack:   # no node made under the hooks still holds an array or a Tensor as a plain attribute
        n = stack.pop()
        if n is None or id(n) in seen or not hasattr(n, 'next_functions'): continue
        seen.add(id(n))
        assert not [k for k, v in vars(n).items() if isinstance(v, (np.ndarray, mytorch.Tensor))], n
        stack += [e[0] for e in n.edges if e is not None and isinstance(e[0], mytorch.engine.Node)]
    hooked = [g.numpy() for g in grad(out, params)]
    assert len(packed) > 10
    assert _worst(plain, hooked) == 0


@needs_torch
def test_unpack_must_return_a_tensor_as_in_pytorch():
    for lib, make in ((mytorch, lambda: tensor([1.0, 2.0], requires_grad=True)),
                      (torch, lambda: torch.tensor([1.0, 2.0], requires_grad=True))):
        x = make()
        hooks = saved_tensors_hooks if lib is mytorch else torch.autograd.graph.saved_tensors_hooks
        with hooks(lambda t: t, lambda t: t.tolist()): y = (x * x).sum()
        with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result of type list"):
            y.backward()


def test_version_check_survives_hooks():
    a = tensor([1.0, 2.0], requires_grad=True)
    b = tensor([3.0, 4.0])
    with saved_tensors_hooks(lambda t: t.clone(), lambda t: t): y = (a * b).sum()
    b.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


@needs_torch
def test_second_derivative_through_hooks_matches_pytorch():
    xs = np.array([0.3, -0.7, 1.1])
    def second(lib, hooks):
        x = (torch.tensor(xs, requires_grad=True) if lib is torch else tensor(xs, requires_grad=True))
        g_of = torch.autograd.grad if lib is torch else grad
        with hooks(lambda t: t.detach().numpy().copy(), lambda a: (torch.from_numpy(a) if lib is torch else tensor(a))):
            (g,) = g_of((x * x * x).sin().sum(), x, create_graph=True)
            (h,) = g_of((g * x).sum(), x)
        return g.detach().numpy(), h.numpy()
    ours = second(mytorch, saved_tensors_hooks)
    theirs = second(torch, torch.autograd.graph.saved_tensors_hooks)
    assert _worst(ours, theirs) < 1e-12


# ---------------------------------------------------------------- checkpoint

@needs_torch
@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_matches_pytorch(reentrant):
    ours, theirs = _mlp(mytorch, 6), _mlp(torch, 6)
    plain = _grads(mytorch, ours, X, ours)
    a = _grads(mytorch, ours, X, lambda z: checkpoint(ours, z, use_reentrant=reentrant))
    b = _grads(torch, theirs, X, lambda z: tcp.checkpoint(theirs, z, use_reentrant=reentrant))
    assert _worst(plain, a) < 1e-12 and _worst(a, b) < 1e-12
    for k in (1, 2, 4, 5):
        a = _grads(mytorch, ours, X, lambda z: checkpoint_sequential(ours, k, z, use_reentrant=reentrant))
        b = _grads(torch, theirs, X, lambda z: tcp.checkpoint_sequential(theirs, k, z, use_reentrant=reentrant))
        assert _worst(a, b) < 1e-12, k


@needs_torch
def test_use_reentrant_warning_and_keyword_errors_as_in_pytorch():
    for fn in (checkpoint, tcp.checkpoint):
        x = (tensor if fn is checkpoint else torch.tensor)([1.0, 2.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(lambda z: z.sin(), x)
        assert any("use_reentrant parameter should be passed explicitly" in str(w.message) for w in caught)
        with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
            fn(lambda z, k: z * k, x, k=2.0, use_reentrant=True)
        assert fn(lambda z, k: z * k, x, k=2.0, use_reentrant=False).tolist() == [2.0, 4.0]
    for fn, lib in ((checkpoint_sequential, mytorch), (tcp.checkpoint_sequential, torch)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(_mlp(lib, 2), 2, (tensor if lib is mytorch else torch.tensor)(X))
        assert any("use_reentrant parameter should be passed explicitly" in str(w.message) for w in caught)


def test_dropout_mask_is_reproduced():
    model = nn.Sequential(nn.Linear(8, 8, dtype=float64), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 8, dtype=float64))
    def run(f, **kw):
        mytorch.manual_seed(11)
        return _grads(mytorch, model, X, f)
    plain = run(model)
    for reentrant in (False, True):
        assert _worst(plain, run(lambda z: checkpoint(model, z, use_reentrant=reentrant))) < 1e-12
    assert _worst(plain, run(lambda z: checkpoint(model, z, use_reentrant=False, preserve_rng_state=False))) > 1e-3
    state = mytorch.get_rng_state()
    mytorch.manual_seed(11); checkpoint(model, tensor(X), use_reentrant=False).sum()
    after = mytorch.get_rng_state().tolist()
    mytorch.manual_seed(11); model(tensor(X))
    assert after == mytorch.get_rng_state().tolist()   # the generator moves as an ordinary forward moves it


@needs_torch
def test_nested_checkpoints_and_create_graph():
    ours = _mlp(mytorch, 6)
    plain = _grads(mytorch, ours, X, ours)
    def region(w): return ours[3:6](checkpoint(ours[:3], w, use_reentrant=False))   # a checkpoint inside another
    def outer(z): return ours[6:](checkpoint(region, z, use_reentrant=False))
    assert _worst(plain, _grads(mytorch, ours, X, outer)) < 1e-12
    xs = np.array([0.3, -0.7, 1.1])
    x = tensor(xs, requires_grad=True)
    f = lambda z: checkpoint(lambda w: checkpoint(lambda v: (v * v * v).sin(), w, use_reentrant=False).exp(),
                             z, use_reentrant=False)
    (g,) = grad(f(x).sum(), x, create_graph=True)
    (h,) = grad(g.sum(), x)
    tx = torch.tensor(xs, requires_grad=True)
    (tg,) = torch.autograd.grad((tx * tx * tx).sin().exp().sum(), tx, create_graph=True)
    (th,) = torch.autograd.grad(tg.sum(), tx)
    assert _worst([g.detach().numpy(), h.numpy()], [tg.detach().numpy(), th.numpy()]) < 1e-12


def test_a_different_second_run_is_refused():
    runs = []
    def moody(z):
        runs.append(1)
        return z.exp() if len(runs) == 1 else z.tanh().tanh()
    x = tensor([1.0, 2.0], requires_grad=True)
    y = checkpoint(moody, x, use_reentrant=False).sum()
    with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
        y.backward()
    shapes = []
    def shifty(z):
        shapes.append(1)
        return (z * z).sum() if len(shapes) == 1 else (z[:1] * z[:1]).sum()
    y = checkpoint(shifty, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="different metadata"):
        y.backward()


def test_each_region_is_let_go_once_its_backward_is_done():
    "While backward runs through segment j, the recomputed values of the segments after it are already freed."
    frames = []
    real = ckpt_module._Frame.__init__
    def tracking(self, *a, **k):
        real(self, *a, **k)
        frames.append(weakref.ref(self))
    live_seen = []
    class Probe(mytorch.autograd.Function):
        @staticmethod
        def forward(ctx, x): return x._data.copy()
        @staticmethod
        def backward(ctx, g):
            gc.collect()
            live_seen.append(sum(1 for f in frames if f() is not None and f().recomputed is not None))
            return g
    model = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(8, 8, dtype=float64), nn.ReLU())])
    layers = list(model.children())
    chain = []
    for i, layer in enumerate(layers):
        chain.append(layer)
        if i % 4 == 0: chain.append(Probe.apply)   # one probe near the start of every segment of 4
    ckpt_module._Frame.__init__ = tracking
    try:
        out = checkpoint_sequential(chain, len(chain) // 5, tensor(X).requires_grad_(), use_reentrant=False)
        out.square().sum().backward()
    finally:
        ckpt_module._Frame.__init__ = real
    assert live_seen and max(live_seen) <= 1, live_seen


def test_planned_runs_keep_what_the_model_says_and_give_the_same_gradients():
    mytorch.manual_seed(5)
    deep = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16, dtype=float64), nn.ReLU()) for _ in range(12)])
    x = mytorch.randn(10, 16, dtype=float64)
    a, c = measure(deep, x, repeat=1)
    assert a == [10 * 16 * 8] * 12
    plain = _grads(mytorch, deep, x.numpy(), deep)
    for budget in (smallest_budget(a), sum(a) / 2, sum(a)):
        plan = plan_segments(a, c, budget)
        kept, peak = plan_memory(deep, plan, x)
        assert peak == plan.peak_bytes <= budget
        for reentrant in (False, True):
            got = _grads(mytorch, deep, x.numpy(), lambda z: checkpoint_sequential(deep, plan, z, use_reentrant=reentrant))
            assert _worst(plain, got) < 1e-12
    with pytest.raises(ValueError, match="the plan is for a chain of 3 layers, and this chain has 12"):
        checkpoint_sequential(deep, plan_cost([1] * 3, [1] * 3, [1]), x, use_reentrant=False)


def test_digits_cnn_plan_fits_and_matches():
    mytorch.manual_seed(6)
    f64 = float64
    cnn = nn.Sequential(
        mytorch.nn.conv.Conv2d(1, 4, 3, padding=1, bias=False, dtype=f64), mytorch.nn.normalization.BatchNorm2d(4, dtype=f64),
        nn.ReLU(), mytorch.nn.pooling.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10, dtype=f64))
    x = mytorch.randn(6, 1, 8, 8, dtype=f64)
    a, c = measure(cnn, x, repeat=1)
    plain = _grads(mytorch, cnn, x.numpy(), cnn)
    plan = plan_segments(a, c, smallest_budget(a))
    kept, peak = plan_memory(cnn, plan, x)
    assert peak <= plan.peak_bytes
    got = _grads(mytorch, cnn, x.numpy(), lambda z: checkpoint_sequential(cnn, plan, z, use_reentrant=False))
    assert _worst(plain, got) < 1e-12


@needs_torch
def test_signatures_and_options_as_in_pytorch():
    import inspect
    for ours, theirs in ((checkpoint, tcp.checkpoint), (checkpoint_sequential, tcp.checkpoint_sequential)):
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters)
    for fn, make in ((checkpoint, tensor), (tcp.checkpoint, torch.tensor)):
        x = make([1.0, 2.0], requires_grad=True)
        with pytest.raises(ValueError, match="determinism_check should be one of"):
            fn(lambda z: z.sin(), x, use_reentrant=False, determinism_check='strict')
        nulls = lambda: (__import__('contextlib').nullcontext(), __import__('contextlib').nullcontext())
        with pytest.raises(ValueError, match="Passing `context_fn` or `debug` is only supported when use_reentrant=False"):
            fn(lambda z: z.sin(), x, use_reentrant=True, context_fn=nulls)
        y = fn(lambda z: z.sin(), x, use_reentrant=False, context_fn=nulls, determinism_check='none', early_stop=False)
        y.sum().backward()
        assert np.allclose(x.grad.tolist(), np.cos([1.0, 2.0]))
