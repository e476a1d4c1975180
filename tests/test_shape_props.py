"""Property tests for the shape ops (chapter 14) against PyTorch, in float64.

Random shapes and random valid arguments (permutations, reshape targets on permuted layouts,
cat dims, split sections, pads including negative ones, ...): forward values and gradients for a
random upstream gradient must equal PyTorch's exactly, except where a backward adds up copies
(repeat, broadcast_to), in an order of its own: those are compared to 1e-12. Where PyTorch
refuses (a `view` of an incompatible layout, a pad that crops too much), MyTorch must refuse too.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

import mytorch.engine, mytorch.shape
from mytorch.engine import tensor, grad
from mytorch import shape as S

PROPS = settings(max_examples=50, deadline=None)
dims = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)
seeds = st.integers(0, 2**32 - 1)


def _tuple(o): return o if isinstance(o, tuple) else (o,)


def check(f, ft, arrays, seed, tol=0.0):
    "Run f on mytorch tensors and ft on torch tensors; values and gradients must agree."
    xs = [tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    outs, touts = _tuple(f(*xs)), _tuple(ft(*ts))
    assert len(outs) == len(touts)
    for o, to in zip(outs, touts):
        assert o.shape == tuple(to.shape)
        assert o.dtype == np.float64
        assert np.array_equal(o.detach().numpy(), to.detach().numpy())
    if not outs: return
    rng = np.random.default_rng(seed)
    Gs = [rng.standard_normal(o.shape) for o in outs]
    gm = grad(outs, xs, [tensor(G) for G in Gs], allow_unused=True)
    gt = torch.autograd.grad(touts, ts, [torch.tensor(G) for G in Gs], allow_unused=True)
    for x, a, b in zip(xs, gm, gt):
        a = np.zeros(x.shape) if a is None else a.numpy()
        b = np.zeros(x.shape) if b is None else b.numpy()
        assert a.shape == b.shape
        if tol: np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
        else: assert np.array_equal(a, b), np.abs(a - b).max()


def array(shape, seed): return np.random.default_rng(seed).standard_normal(shape)


@st.composite
def permuted(draw):
    "An array and a permutation of its dims (a non-contiguous layout, unless the permutation is trivial)."
    shape = draw(dims)
    return array(shape, draw(seeds)), tuple(draw(st.permutations(range(len(shape)))))


@st.composite
def factorization(draw, n):
    "A random shape with n elements, possibly with 1s and one -1."
    primes, k = [], n
    for p in (2, 3, 5, 7):
        while k % p == 0: primes.append(p); k //= p
    if k > 1: primes.append(k)
    primes = draw(st.permutations(primes))
    ndim = draw(st.integers(1, 4))
    out = [1] * ndim
    for p in primes: out[draw(st.integers(0, ndim - 1))] *= p
    if draw(st.booleans()): out[draw(st.integers(0, ndim - 1))] = -1
    return tuple(out)


@PROPS
@given(permuted(), seeds)
def test_permute_transpose_movedim(ap, seed):
    a, p = ap
    n = a.ndim
    check(lambda x: x.permute(*p), lambda x: x.permute(*p), [a], seed)
    d0, d1 = p[0] - n, p[-1]
    check(lambda x: x.transpose(d0, d1), lambda x: x.transpose(d0, d1), [a], seed)
    src, dst = p[: n // 2 + 1], tuple(sorted(p[: n // 2 + 1]))
    check(lambda x: S.movedim(x, src, dst), lambda x: torch.movedim(x, src, dst), [a], seed)
    if n >= 2: check(lambda x: x.mT, lambda x: x.mT, [a], seed)


@PROPS
@given(st.data(), permuted(), seeds)
def test_reshape_and_view_on_permuted_layouts(data, ap, seed):
    a, p = ap
    target = data.draw(factorization(a.size))
    check(lambda x: x.permute(*p).reshape(target), lambda x: x.permute(*p).reshape(target), [a], seed)
    x, xt = tensor(a).permute(*p), torch.tensor(a).permute(*p)
    assert x._data.flags.c_contiguous == xt.is_contiguous()
    try: expected = tuple(xt.view(target).shape)
    except RuntimeError: expected = None
    if expected is None:
        with pytest.raises(RuntimeError, match="Use .reshape"): x.view(target)
    else:
        check(lambda x: x.permute(*p).view(target), lambda x: x.permute(*p).view(target), [a], seed)
    start = data.draw(st.integers(0, a.ndim - 1))
    end = data.draw(st.integers(start, a.ndim - 1))
    check(lambda x: x.flatten(start, end), lambda x: x.flatten(start, end), [a], seed)


@PROPS
@given(st.data(), dims, seeds)
def test_cat_split_chunk(data, shape, seed):
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    lengths = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    arrays = [array(shape[:d % len(shape)] + (n,) + shape[d % len(shape) + 1:], seed + i) for i, n in enumerate(lengths)]
    check(lambda *xs: S.cat(list(xs), d), lambda *xs: torch.cat(list(xs), d), arrays, seed)
    a = array(shape, seed)
    n = shape[d]
    size = data.draw(st.integers(1, n + 1))
    check(lambda x: x.split(size, d), lambda x: x.split(size, d), [a], seed)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    sections = [b - c for b, c in zip(cuts + [n], [0] + cuts)]
    check(lambda x: x.split(sections, d), lambda x: x.split(sections, d), [a], seed)
    chunks = data.draw(st.integers(1, 5))
    check(lambda x: x.chunk(chunks, d), lambda x: x.chunk(chunks, d), [a], seed)
    check(lambda x: x.narrow(d, cuts[0] if cuts else 0, n - (cuts[0] if cuts else 0)),
          lambda x: x.narrow(d, cuts[0] if cuts else 0, n - (cuts[0] if cuts else 0)), [a], seed)


@PROPS
@given(st.data(), dims, seeds)
def test_stack_unbind(data, shape, seed):
    d = data.draw(st.integers(-len(shape) - 1, len(shape)))
    k = data.draw(st.integers(1, 4))
    arrays = [array(shape, seed + i) for i in range(k)]
    check(lambda *xs: S.stack(list(xs), d), lambda *xs: torch.stack(list(xs), d), arrays, seed)
    u = data.draw(st.integers(-len(shape), len(shape) - 1))
    check(lambda x: x.unbind(u), lambda x: x.unbind(u), arrays[:1], seed)


@PROPS
@given(st.data(), dims, seeds)
def test_pad_constant(data, shape, seed):
    k = data.draw(st.integers(1, len(shape)))
    widths = tuple(data.draw(st.lists(st.integers(-3, 3), min_size=2 * k, max_size=2 * k)))
    value = data.draw(st.sampled_from([0.0, -1.5, 2.0]))
    a = array(shape, seed)
    try: F.pad(torch.tensor(a), widths, value=value)
    except RuntimeError:
        with pytest.raises(RuntimeError): S.pad(tensor(a), widths, value=value)
        return
    check(lambda x: S.pad(x, widths, value=value), lambda x: F.pad(x, widths, value=value), [a], seed)


@PROPS
@given(st.data(), dims, seeds)
def test_flip_repeat_tri(data, shape, seed):
    a = array(shape, seed)
    fl = tuple(data.draw(st.sets(st.integers(0, len(shape) - 1))))
    check(lambda x: x.flip(fl), lambda x: x.flip(fl), [a], seed)
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape) + 2)))
    check(lambda x: x.repeat(*reps), lambda x: x.repeat(*reps), [a], seed, tol=1e-12)
    if len(shape) >= 2:
        k = data.draw(st.integers(-4, 4))
        check(lambda x: x.triu(k), lambda x: x.triu(k), [a], seed)
        check(lambda x: x.tril(k), lambda x: x.tril(k), [a], seed)


@PROPS
@given(st.data(), st.lists(st.integers(1, 3), min_size=0, max_size=4).map(tuple), seeds)
def test_squeeze_unsqueeze_broadcast(data, shape, seed):
    a = array(shape, seed)
    check(lambda x: x.squeeze(), lambda x: x.squeeze(), [a], seed)
    if shape:
        sq = tuple(d - len(shape) * data.draw(st.booleans()) for d in data.draw(st.sets(st.integers(0, len(shape) - 1))))
        check(lambda x: x.squeeze(sq), lambda x: x.squeeze(sq), [a], seed)
    u = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check(lambda x: x.unsqueeze(u), lambda x: x.unsqueeze(u), [a], seed)
    lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    target = lead + tuple(data.draw(st.integers(1, 3)) if n == 1 else n for n in shape)
    check(lambda x: S.broadcast_to(x, target), lambda x: torch.broadcast_to(x, target), [a], seed, tol=1e-12)
