"""The reductions of nbs/13_reductions.ipynb against PyTorch, property-based (float64).

Random shapes (0-d to 4-d), random dims (one, possibly negative; a tuple; None or ()), random
`keepdim`; half the inputs are small integers, so that ties (for amax/amin/norm(inf)), zeros
(for prod) and zero slices (for norm and std) are frequent. For each case the value, the
gradient for a random upstream gradient, and the second derivative (the gradient of
<w, gradient> for a random w) must equal PyTorch's to 1e-10, or both libraries must refuse.

Departures checked as such: where PyTorch returns nan for a 0/0 (mean of nothing, var/std
with n - correction <= 0) mytorch raises; the second derivative of norm(p=2) at a zero slice
is nan in PyTorch and 0 here (the same subgradient convention as the first derivative).
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import mytorch.engine, mytorch.reductions  # noqa: E401 (reductions adds the Tensor methods)
from mytorch.engine import grad, tensor

TOL = 1e-10
FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INF = float('inf')


@st.composite
def inputs(draw, min_size=1, max_ndim=4):
    "A float64 array: normal numbers, or small integers (ties, zeros) half the time."
    ndim = draw(st.integers(0, max_ndim))
    shape = tuple(draw(st.lists(st.integers(min_size, 4), min_size=ndim, max_size=ndim)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()): return rng.integers(-2, 3, shape).astype(np.float64)
    return rng.standard_normal(shape)


@st.composite
def dims(draw, ndim, allow_tuple=True):
    "None, (), one dim (maybe negative) or a tuple of distinct dims (maybe negative, any order)."
    n = max(ndim, 1)
    kinds = ['all', 'one'] + (['tuple'] if allow_tuple and ndim else [])
    kind = draw(st.sampled_from(kinds))
    if kind == 'all': return draw(st.sampled_from([None, ()]))
    if kind == 'one': return draw(st.integers(-n, n - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(d - ndim if draw(st.booleans()) else d for d in axes)


def axes_of(dim, ndim):
    "The non-negative axes `dim` reduces (all of them for None and ())."
    if dim is None or dim == (): return tuple(range(ndim))
    if ndim == 0: return ()
    return tuple(sorted(d % ndim for d in ((dim,) if isinstance(dim, int) else dim)))


def torch_dims(dim, ndim):
    "`dim` for PyTorch ops that require one (logsumexp): all dims spelled out."
    if dim is None or dim == (): return tuple(range(ndim)) if ndim else 0
    return dim


def close(mine, theirs, what, nan_ok=None):
    "Elementwise |mine - theirs| <= TOL, nan where both are nan (or where `nan_ok` allows torch's nan)."
    mine, theirs = np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert mine.shape == theirs.shape, f"{what}: shape {mine.shape} vs torch {theirs.shape}"
    both_nan = np.isnan(mine) & np.isnan(theirs)
    excused = np.isnan(theirs) & ~np.isnan(mine) & (nan_ok if nan_ok is not None else False)
    same_inf = np.isinf(mine) & (mine == theirs)
    with np.errstate(invalid='ignore'): diff = np.where(both_nan | excused | same_inf, 0.0, np.abs(mine - theirs))
    worst = np.max(diff, initial=0.0)   # np.max propagates a nan that only one side has
    assert worst <= TOL, f"{what}: max |mytorch - torch| = {worst} (mytorch {mine}, torch {theirs})"


def compare(f, f_torch, a, seed=0, second_nan_ok=None):
    "Value, gradient and second derivative of f at `a` against PyTorch's f_torch."
    x, xt = tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, yt = f(x), f_torch(xt)
    close(y.detach().numpy(), yt.detach().numpy(), "value")
    rng = np.random.default_rng(seed)
    v, w = rng.standard_normal(y.shape), rng.standard_normal(a.shape)
    g, = grad(y, x, grad_outputs=tensor(v), create_graph=True)
    gt, = torch.autograd.grad(yt, xt, torch.tensor(v), create_graph=True)
    close(g.detach().numpy(), gt.detach().numpy(), "gradient")
    h = grad(g, x, grad_outputs=tensor(w), allow_unused=True)[0] if g.requires_grad else None
    ht = torch.autograd.grad(gt, xt, torch.tensor(w), allow_unused=True)[0] if gt.requires_grad else None
    h = np.zeros(a.shape) if h is None else h.numpy()
    ht = np.zeros(a.shape) if ht is None else ht.detach().numpy(force=True)
    close(h, ht, "second derivative", nan_ok=second_nan_ok(x) if second_nan_ok else None)


def kept(y, dims, keepdim):
    "PyTorch's keepdim=True result squeezed by hand (for ops composed from single-dim calls)."
    return y if keepdim else y.reshape([n for i, n in enumerate(y.shape) if i not in dims])


def torch_prod(t, dim, keepdim):
    "PyTorch's prod takes one int dim: a tuple is a product per dim."
    ax = axes_of(dim, t.ndim)
    for d in sorted(ax, reverse=True): t = t.prod(d, keepdim=True)
    return kept(t, ax, keepdim)


@given(st.data())
@FAST
def test_sum_mean_prod(data):
    a = data.draw(inputs())
    dim, keepdim = data.draw(dims(a.ndim)), data.draw(st.booleans())
    compare(lambda t: t.sum(dim, keepdim), lambda t: t.sum(dim=dim, keepdim=keepdim), a)
    compare(lambda t: t.mean(dim, keepdim=keepdim), lambda t: t.mean(dim=dim, keepdim=keepdim), a)
    compare(lambda t: t.prod(dim, keepdim), lambda t: torch_prod(t, dim, keepdim), a)


@given(st.data())
@FAST
def test_amax_amin_max_min(data):
    a = data.draw(inputs())
    dim, keepdim = data.draw(dims(a.ndim)), data.draw(st.booleans())
    tdim = () if dim is None else dim
    compare(lambda t: t.amax(dim, keepdim), lambda t: t.amax(tdim, keepdim), a)
    compare(lambda t: t.amin(dim, keepdim), lambda t: t.amin(tdim, keepdim), a)
    compare(lambda t: t.max(), lambda t: t.max(), a)
    d = data.draw(st.integers(-max(a.ndim, 1), max(a.ndim, 1) - 1))
    compare(lambda t: t.max(d, keepdim).values, lambda t: t.max(d, keepdim).values, a)
    compare(lambda t: t.min(d, keepdim=keepdim).values, lambda t: t.min(d, keepdim=keepdim).values, a)
    assert tensor(a).max(d, keepdim).indices.tolist() == torch.tensor(a).max(d, keepdim).indices.tolist()
    assert tensor(a).argmin(d, keepdim).tolist() == torch.tensor(a).argmin(d, keepdim).tolist()
    assert tensor(a).argmax().item() == torch.tensor(a).argmax().item()


@given(st.data())
@FAST
def test_var_std(data):
    a = data.draw(inputs())
    dim, keepdim = data.draw(dims(a.ndim)), data.draw(st.booleans())
    style = data.draw(st.sampled_from(['default', 'correction', 'unbiased']))
    if style == 'correction':
        c = data.draw(st.sampled_from([0, 1, 2, 0.5]))
        mine, theirs = dict(correction=c), dict(correction=c)
    elif style == 'unbiased':
        u = data.draw(st.booleans())
        c, mine, theirs = int(u), dict(unbiased=u), dict(unbiased=u)
    else: c, mine, theirs = 1, {}, {}
    n = math.prod(a.shape[i] for i in axes_of(dim, a.ndim))
    tdim = None if dim == () else dim   # torch's unbiased= overloads want an int or a tuple
    for op in ('var', 'std'):
        f = lambda t: getattr(t, op)(dim, keepdim=keepdim, **mine)
        if n - c <= 0:   # PyTorch returns nan or inf here; mytorch refuses
            with pytest.raises(RuntimeError, match="n - correction"): f(tensor(a, requires_grad=True))
            continue
        compare(f, lambda t: getattr(t, op)(tdim, keepdim=keepdim, **theirs), a)


@given(st.data())
@FAST
def test_logsumexp(data):
    a = data.draw(inputs())
    dim, keepdim = data.draw(dims(a.ndim)), data.draw(st.booleans())
    scale = data.draw(st.sampled_from([1.0, 1000.0]))   # 1000: the shift must keep it finite
    mine_dim = () if dim is None else dim
    compare(lambda t: t.logsumexp(mine_dim, keepdim), lambda t: t.logsumexp(torch_dims(dim, a.ndim), keepdim), a * scale)


@given(st.data())
@FAST
def test_norm(data):
    a = data.draw(inputs())
    dim, keepdim = data.draw(dims(a.ndim)), data.draw(st.booleans())
    p = data.draw(st.sampled_from([2, 'fro', 1, INF, -INF]))
    ax = axes_of(dim, a.ndim)
    if p == 'fro' and dim is not None and dim != () and len(ax) > 2:
        with pytest.raises(RuntimeError): tensor(a).norm(p, dim)
        with pytest.raises(RuntimeError): torch.tensor(a).norm(p, dim)
        return
    tdim = None if dim == () else dim

    def zero_slice(x):   # PyTorch's second derivative of the 2-norm is nan there, ours 0
        n = np.sqrt(np.sum(x.detach().numpy() ** 2, axis=ax, keepdims=True))
        return np.broadcast_to(n == 0, a.shape)
    compare(lambda t: t.norm(p, dim, keepdim), lambda t: t.norm(p, tdim, keepdim), a,
            second_nan_ok=zero_slice if p in (2, 'fro') else None)


@given(st.data())
@FAST
def test_cumsum(data):
    a = data.draw(inputs())
    d = data.draw(st.integers(-max(a.ndim, 1), max(a.ndim, 1) - 1))
    compare(lambda t: t.cumsum(d), lambda t: t.cumsum(d), a)


@given(st.data())
@FAST
def test_empty_and_out_of_range(data):
    "Empty tensors: the same values as PyTorch, or a refusal where PyTorch raises or returns nan. Bad dims: IndexError."
    a = data.draw(inputs(min_size=0, max_ndim=3))
    dim = data.draw(dims(a.ndim))
    x, xt = tensor(a), torch.tensor(a)
    close(x.sum(dim).numpy(), xt.sum(dim=dim).numpy(), "sum")
    close(x.prod(dim).numpy(), torch_prod(xt, dim, False).numpy(), "prod")
    close(x.norm(2, dim).numpy(), xt.norm(2, None if dim == () else dim).numpy(), "norm")
    close(x.logsumexp(() if dim is None else dim).numpy(), xt.logsumexp(torch_dims(dim, a.ndim)).numpy(), "logsumexp")
    ax = axes_of(dim, a.ndim)
    n, outputs = math.prod(a.shape[i] for i in ax), math.prod(a.shape[i] for i in range(a.ndim) if i not in ax)
    if n == 0 and outputs > 0:      # 0/0: PyTorch's nan, our error
        assert np.isnan(xt.mean(dim=dim).numpy()).all()
        with pytest.raises(RuntimeError, match="combines zero elements"): x.mean(dim)
    else: close(x.mean(dim).numpy(), xt.mean(dim=dim).numpy(), "mean")
    if n == 0:                      # the max of nothing: both refuse, even when there are no outputs
        with pytest.raises(RuntimeError, match="of no elements is undefined"): x.amax(dim)
        with pytest.raises((RuntimeError, IndexError)): xt.amax(() if dim is None else dim)
    else: close(x.amax(dim).numpy(), xt.amax(() if dim is None else dim).numpy(), "amax")
    bad = data.draw(st.sampled_from([max(a.ndim, 1), -max(a.ndim, 1) - 1, 7]))
    with pytest.raises(IndexError, match=f"dim {bad} is out of range for a tensor with {a.ndim} dims"): x.sum(bad)
    with pytest.raises(IndexError): xt.sum(bad)


def test_integer_dtypes():
    "Integer sums, products and cumsums are int64 as in PyTorch; mean, var and norm of integers refuse."
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    for op in ('sum', 'prod', 'cumsum'):
        mine, theirs = getattr(tensor(a), op)(1), getattr(torch.tensor(a), op)(1)
        assert mine.tolist() == theirs.tolist() and str(mine.dtype) == str(theirs.dtype).replace('torch.', '')
    for op in ('mean', 'var', 'std', 'norm'):
        with pytest.raises(RuntimeError, match="needs a floating-point tensor"): getattr(tensor(a), op)()
        with pytest.raises(RuntimeError): getattr(torch.tensor(a), op)()
