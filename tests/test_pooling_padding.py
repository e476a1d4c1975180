"""Max and average pooling against PyTorch over every small geometry, windows that lie entirely in
the padding included (nbs/26_pooling.ipynb, kernels/pooling.pyx).

The grid: sizes 1-7, kernel 1-3, stride 1-3, padding 0..kernel//2, dilation 1-2 (max pooling
only; average pooling has none), both rounding modes, in float64, for max_pool1d/2d (values,
indices, shapes, gradients) and avg_pool1d/2d (both `count_include_pad`, and `divisor_override`).
A two-dimensional case pairs one axis geometry of the grid with another, so that every axis
geometry is met both as the height and as the width. The max pools run on both kernel paths:
the compiled twins and the NumPy references.

A dilated window that starts in the left padding can step over a short input altogether (n = 1,
k = 2, p = 1, d = 2: taps at -1 and 1). PyTorch returns -inf for it, as MyTorch does, but an index
past the end of the axis, and its backward writes that window's gradient at that index: outside
the gradient buffer, which can corrupt the process's heap. So for those geometries PyTorch's
backward is never run here: the forward is compared (values and shapes; MyTorch's index is -1),
and MyTorch's gradient is checked by finite differences.
"""
import itertools

import numpy as np
import pytest
from conftest import compiled_twin

torch = pytest.importorskip("torch")
TF = torch.nn.functional

import mytorch
import mytorch.nn.pooling as pooling
from mytorch.autograd.functional import jvp
from mytorch.nn.pooling import avg_pool1d, avg_pool2d, max_pool1d, max_pool2d, pool_output_size

EPS = np.finfo(np.float64).eps


def axis_geometries(sizes=range(1, 8), kernels=range(1, 4), strides=range(1, 4), dilations=(1, 2)):
    "(n, k, s, p, d, ceil_mode) along one axis: padding 0..k//2, both rounding modes."
    for n, k, s, d, ceil in itertools.product(sizes, kernels, strides, dilations, (False, True)):
        for p in range(k // 2 + 1):
            yield n, k, s, p, d, ceil


AXES = list(axis_geometries())
AVG_AXES = [a for a in AXES if a[4] == 1]


def pairs(axes):
    "Two-dimensional geometries: each axis geometry as the height once, with a width that cycles through the grid."
    step = 7 if len(axes) % 7 else 11          # coprime with len(axes): every geometry is also a width
    assert np.gcd(step, len(axes)) == 1
    return [(axes[i], axes[(i * step + 3) % len(axes)]) for i in range(len(axes))]


def taps_miss(n, k, s, p, d, o) -> bool:
    "Does window o along this axis have no tap in [0, n)? (the definition, tap by tap)"
    return not any(0 <= o * s - p + j * d < n for j in range(k))


def empty_mask(axes, out_shape):
    "The windows whose taps all fall in the padding, by the definition, over the output's last len(axes) dims."
    masks = [np.array([taps_miss(n, k, s, p, d, o) for o in range(m)]) for (n, k, s, p, d, _), m in zip(axes, out_shape)]
    if len(masks) == 1: return masks[0]
    return masks[0][:, None] | masks[1][None, :]


def distinct(rng, shape):
    """float64 inputs with no ties, at least 0.25 apart and exactly representable, so that max pooling is
    differentiable at them and a finite difference of step 1/64 never changes a window's winner."""
    return (rng.permutation(int(np.prod(shape))).reshape(shape) - np.prod(shape) / 2) * 0.25


def upstream(rng, shape):
    "Exactly representable upstream gradients (multiples of 1/4): sums of them are exact in float64."
    return rng.integers(-8, 9, shape) / 4.0


def args(axes, key):
    "One pool argument (position `key` of the axis tuples) as a PyTorch argument: an int in 1-D, a pair in 2-D."
    vals = tuple(a[key] for a in axes)
    return vals[0] if len(vals) == 1 else vals


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    "PyTorch's pools on tiny inputs: a thread pool costs milliseconds per call on a busy machine, one thread none."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=["compiled", "numpy"])
def kernels(request, monkeypatch):
    "Run the max pools on one kernel path: the compiled twins, or the NumPy references (as MYTORCH_KERNELS=numpy)."
    for name in ("max_pool_with_indices", "plane_scatter_add"):
        f = getattr(pooling, name)
        impl = compiled_twin(f) if request.param == "compiled" else f.reference
        monkeypatch.setattr(pooling, name, impl)
        if impl is f.reference:                  # `_kernel` asks for `.reference` for dtypes the kernels do not take
            monkeypatch.setattr(impl, "reference", impl, raising=False)
    return request.param


def finite_difference_check(pool, x: np.ndarray, g: np.ndarray, live: np.ndarray, grad: np.ndarray, h=1 / 64):
    """Check `grad` (the backward of pool at x for the upstream g) by central differences of
    L(x) = sum of g * pool(x) over the windows that see input (`live`); the others' outputs are -inf,
    constants whose own gradient is checked to be zero by the caller."""
    gl = np.where(live, g, 0.0)
    def L(a):
        y = pool(mytorch.tensor(a)).numpy()
        return float(np.sum(np.where(live, y, 0.0) * gl))
    scale = float(np.sum(np.abs(gl)) * (np.abs(x).max() + h))
    tol = 4 * EPS * max(gl.size, 1) * scale / h      # rounding of the two sums, divided by the step
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        fd = (L(x + e) - L(x - e)) / (2 * h)
        assert abs(fd - grad[i]) <= tol, (i, fd, grad[i], tol)


def check_max_pool(nd, axes, kernels, rng):
    "One max pool geometry against PyTorch: raises AssertionError with what differs. Returns 'empty' or 'ok'."
    ours_f, torch_f = (max_pool1d, TF.max_pool1d) if nd == 1 else (max_pool2d, TF.max_pool2d)
    ceil = axes[0][5]
    if nd == 2: axes = (axes[0], axes[1][:5] + (ceil,))   # ceil_mode is one flag for both axes: the height's
    kw = dict(kernel_size=args(axes, 1), stride=args(axes, 2), padding=args(axes, 3), dilation=args(axes, 4),
              ceil_mode=ceil)
    shape = (2, 2) + tuple(a[0] for a in axes)
    x = distinct(rng, shape)
    try:
        y_t, i_t = torch_f(torch.tensor(x), return_indices=True, **kw)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="Output size is too small"):
            ours_f(mytorch.tensor(x), return_indices=True, **kw)
        return "refused"
    xm = mytorch.tensor(x, requires_grad=True)
    y, idx = ours_f(xm, return_indices=True, **kw)
    assert y.shape == tuple(y_t.shape) and idx.dtype == np.int64
    assert tuple(y_t.shape[-nd:]) == tuple(pool_output_size(*a) for a in axes)
    np.testing.assert_array_equal(y.detach().numpy(), y_t.numpy())             # -inf where a window is empty
    empty = np.broadcast_to(empty_mask(axes, y.shape[-nd:]), y.shape)
    geo = pooling._geometry(xm, nd, "test", **kw)
    found = pooling._empty_windows(geo)
    assert (found is None) == (not empty.any())
    if found is not None: np.testing.assert_array_equal(found if nd == 2 else found[0], empty[0, 0])
    np.testing.assert_array_equal(idx.numpy()[~empty], i_t.numpy()[~empty])  # PyTorch's indices where a window sees input
    assert (idx.numpy()[empty] == -1).all()                                   # and -1, no position, where none
    assert np.isneginf(y.detach().numpy()[empty]).all()
    g = upstream(rng, y.shape)
    y.backward(mytorch.tensor(g))
    if not empty.any():                                       # PyTorch's backward is safe: compare with it
        xt = torch.tensor(x, requires_grad=True)
        torch_f(xt, **kw).backward(torch.tensor(g))
        np.testing.assert_array_equal(xm.grad.numpy(), xt.grad.numpy())     # sums of multiples of 1/4: exact
        return "ok"
    # PyTorch's backward would scatter the empty windows' gradients outside its buffer: check ours alone
    only_empty = mytorch.tensor(x, requires_grad=True)
    ours_f(only_empty, **kw).backward(mytorch.tensor(np.where(empty, g, 0.0)))
    assert not only_empty.grad.numpy().any(), "an empty window's output is a constant: no input gets its gradient"
    finite_difference_check(lambda a: ours_f(a, **kw), x, g, ~empty, xm.grad.numpy())
    return "empty"


@pytest.mark.parametrize("nd", [1, 2])
def test_max_pool_grid_matches_pytorch(nd, kernels):
    rng = np.random.default_rng(nd)
    cases = [(a,) for a in AXES] if nd == 1 else pairs(AXES)
    outcomes, failures = {}, []
    for axes in cases:
        try:
            r = check_max_pool(nd, axes, kernels, rng)
            outcomes[r] = outcomes.get(r, 0) + 1
        except AssertionError as e:
            failures.append(f"{axes}: {str(e)[:300]}")
    assert not failures, f"{len(failures)} of {len(cases)} geometries differ ({kernels} kernels):\n" + "\n".join(failures[:10])
    assert outcomes.get("empty", 0) > 0 and outcomes.get("ok", 0) > 100    # the grid reaches the edge case


def check_avg_pool(nd, axes, cip, override, rng):
    ours_f, torch_f = (avg_pool1d, TF.avg_pool1d) if nd == 1 else (avg_pool2d, TF.avg_pool2d)
    ceil = axes[0][5]
    if nd == 2: axes = (axes[0], axes[1][:5] + (ceil,))
    kw = dict(kernel_size=args(axes, 1), stride=args(axes, 2), padding=args(axes, 3), ceil_mode=ceil,
              count_include_pad=cip)
    if override is not None: kw["divisor_override"] = override
    x = distinct(rng, (2, 2) + tuple(a[0] for a in axes)) / 8
    try:
        y_t = torch_f(torch.tensor(x), **kw)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="Output size is too small"):
            ours_f(mytorch.tensor(x), **kw)
        return "refused"
    assert not empty_mask(axes, y_t.shape[-nd:]).any()       # without dilation no window misses the input
    xm = mytorch.tensor(x, requires_grad=True)
    y = ours_f(xm, **kw)
    assert y.shape == tuple(y_t.shape) and y.dtype == mytorch.float64
    taps = int(np.prod([a[1] for a in axes]))
    tol = 4 * EPS * taps * np.abs(x).max()                   # a sum of `taps` terms, then one division
    np.testing.assert_allclose(y.detach().numpy(), y_t.numpy(), rtol=0, atol=tol)
    g = upstream(rng, y.shape)
    y.backward(mytorch.tensor(g))
    xt = torch.tensor(x, requires_grad=True)
    torch_f(xt, **kw).backward(torch.tensor(g))
    overlap = int(np.prod([-(-a[1] // a[2]) for a in axes]))   # windows that share one input
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=0, atol=4 * EPS * overlap * np.abs(g).max())
    return "ok"


@pytest.mark.parametrize("nd", [1, 2])
def test_avg_pool_grid_matches_pytorch(nd):
    rng = np.random.default_rng(10 + nd)
    cases = [(a,) for a in AVG_AXES] if nd == 1 else pairs(AVG_AXES)
    divisors = [(True, None), (False, None)] + ([(True, 3), (False, -2)] if nd == 2 else [])
    failures, ok = [], 0
    for axes, (cip, override) in itertools.product(cases, divisors):
        try: ok += check_avg_pool(nd, axes, cip, override, rng) == "ok"
        except AssertionError as e: failures.append(f"{axes} cip={cip} divisor_override={override}: {str(e)[:300]}")
    assert not failures, f"{len(failures)} geometries differ:\n" + "\n".join(failures[:10])
    assert ok > 100


def test_output_size_matches_pytorch_on_a_wider_grid():
    "pool_output_size (and the refusal of a geometry with no window) against PyTorch's own shapes."
    differ, checked = [], 0
    for n, k, s, p, d, ceil in axis_geometries(range(1, 13), range(1, 7), range(1, 5), range(1, 5)):
        x = torch.zeros(1, 1, n, dtype=torch.float64)
        try: want = TF.max_pool1d(x, k, s, p, d, ceil).shape[-1]
        except RuntimeError: want = None
        got = pool_output_size(n, k, s, p, d, ceil)
        if (got if got > 0 else None) != want: differ.append((n, k, s, p, d, ceil, got, want))
        if d == 1:
            try: want_avg = TF.avg_pool1d(x, k, s, p, ceil).shape[-1]
            except RuntimeError: want_avg = None
            if (got if got > 0 else None) != want_avg: differ.append(("avg", n, k, s, p, ceil, got, want_avg))
        checked += 1
    assert checked > 5000 and not differ, differ[:10]


def test_an_empty_window_is_the_only_window_on_its_axis():
    "Under PyTorch's rules, when a geometry has an empty window every window is empty (as the chapter says)."
    seen = 0
    for n, k, s, p, d, ceil in axis_geometries(range(1, 13), range(1, 7), range(1, 5), range(1, 5)):
        o = pool_output_size(n, k, s, p, d, ceil)
        if o <= 0: continue
        misses = [taps_miss(n, k, s, p, d, w) for w in range(o)]
        if any(misses):
            seen += 1
            assert all(misses), (n, k, s, p, d, ceil)
    assert seen > 10


def test_the_reported_case(kernels):
    "(2, 1, 1, 5), kernel 2, stride 2, padding 1, dilation 2, ceil_mode: -inf, index -1, and a zero gradient."
    x = mytorch.tensor(np.arange(10.0).reshape(2, 1, 1, 5), requires_grad=True)
    y, idx = max_pool2d(x, 2, 2, 1, 2, ceil_mode=True, return_indices=True)
    y_t = TF.max_pool2d(torch.arange(10.0, dtype=torch.float64).reshape(2, 1, 1, 5), 2, 2, 1, 2, True)
    assert y.shape == tuple(y_t.shape) == (2, 1, 1, 3)
    assert np.isneginf(y.detach().numpy()).all() and np.isneginf(y_t.numpy()).all()
    assert (idx.numpy() == -1).all()
    y.backward(mytorch.ones(2, 1, 1, 3, dtype=mytorch.float64))
    assert x.grad.shape == (2, 1, 1, 5) and not x.grad.numpy().any()
    # the second derivative, and forward mode, see the same constant: zeros, never a read at index -1
    gx, = mytorch.autograd.grad(max_pool2d(x, 2, 2, 1, 2, True), (x,), mytorch.ones(2, 1, 1, 3, dtype=mytorch.float64),
                                create_graph=True)
    assert not gx.detach().numpy().any()
    _, tangent = jvp(lambda a: max_pool2d(a, 2, 2, 1, 2, True), x.detach(), mytorch.ones(2, 1, 1, 5, dtype=mytorch.float64))
    assert tangent.shape == (2, 1, 1, 3) and not tangent.numpy().any()


@pytest.mark.parametrize("module, fn", [(mytorch.nn.MaxPool1d(2, 1, 1, 2, True), max_pool1d),
                                        (mytorch.nn.MaxPool2d((2, 1), 1, (1, 0), (2, 1), True), max_pool2d)])
def test_modules_handle_empty_windows_too(module, fn, kernels):
    x = mytorch.tensor(np.ones((3, 1, 1) if fn is max_pool1d else (2, 1, 1, 4)), requires_grad=True)
    y, idx = module(x)
    assert np.isneginf(y.detach().numpy()).all() and (idx.numpy() == -1).all()
    y.sum().backward()
    assert not x.grad.numpy().any()
