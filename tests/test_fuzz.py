"""Differential fuzz suite: MyTorch against PyTorch, the specification, on random inputs drawn by hypothesis.

The chapter nbs/90_differential_testing.ipynb explains it. Everything compares values, dtypes, shapes and
gradients (for a random upstream gradient) in float64 with fuzz_support's tolerance, and refusals where
PyTorch refuses. `MYTORCH_FUZZ_EXAMPLES` sets the total number of examples (default
fuzz_support.DEFAULT_TOTAL); each test declares its share with `@fuzz(n)`. A failure prints hypothesis's
shrunk falsifying example and a `@reproduce_failure` blob; `--hypothesis-seed=N` replays a whole run.

Deliberate departures from PyTorch are checked as such, each where it is tested: strict broadcasting
(ambiguous rank-mismatched alignment raises BroadcastError), undefined math raising DomainError under the
default math policy (mean of nothing, var/std without degrees of freedom, a 0/0 mean loss), and the
second derivative of the 2-norm at a zero slice (0 here, nan in PyTorch).
"""
import math
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import assume, given, strategies as st
from hypothesis.extra import numpy as hnp

import mytorch.nn.functional as MF
from mytorch.engine import BroadcastError, grad, tensor
from mytorch.elementwise import set_math_policy
from mytorch.linalg import einsum
from mytorch import shape as S
from mytorch.scalar import DomainError

import fuzz_support as fs
from fuzz_support import assert_close, both_raise, broadcast_policy, differential, fuzz, torch_raises

seeds = st.integers(0, 2**32 - 1)
INF = float('inf')


@pytest.fixture(scope='module', autouse=True)
def report(request):
    "At the end of the session, one line with the number of examples, the time and the number of mismatches."
    start = time.perf_counter()
    yield
    fs.CLOCK['seconds'] = time.perf_counter() - start
    class Summary:
        def pytest_terminal_summary(self, terminalreporter):
            failed = sum(1 for r in terminalreporter.stats.get('failed', []) if 'test_fuzz' in r.nodeid)
            terminalreporter.write_line(fs.summary(failed))
    if not request.config.pluginmanager.has_plugin('fuzz-summary'):
        request.config.pluginmanager.register(Summary(), 'fuzz-summary')


class Op:
    "An op written once for both libraries: f(F, *tensors), F being mytorch.nn.functional or torch.nn.functional."
    def __init__(self, name, f, *domains, grad_rtol=None):
        self.name, self.f, self.domains, self.grad_rtol = name, f, domains, grad_rtol
    def mine(self, *xs): return self.f(MF, *xs)
    def torch(self, *xs): return self.f(TF, *xs)
    def __repr__(self): return self.name


# ---------------------------------------------------------------- elementwise ops, with broadcasting
# Value domains: each takes (rng, shape, grid) and returns float64 values where the op is defined. With grid=True
# the values come from a few round numbers, so that the joins of piecewise ops (relu at 0, clamp at its bounds,
# hardsigmoid at +-3) and ties (maximum of equal values) are hit exactly: PyTorch's choice there is the spec.
def anywhere(rng, shape, grid):
    return rng.choice([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0], shape) if grid else rng.uniform(-3, 3, shape)
def positive(rng, shape, grid): return rng.choice([0.5, 1.0, 2.0], shape) if grid else rng.uniform(0.2, 3.0, shape)
def above_minus_one(rng, shape, grid): return rng.choice([-0.5, 0.0, 1.0], shape) if grid else rng.uniform(-0.9, 3.0, shape)
def nonzero(rng, shape, grid): return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 3.0, shape)
def wide(rng, shape, grid): return rng.choice([-40.0, 0.0, 40.0], shape) if grid else rng.uniform(-60, 60, shape)

BINARY = [
    Op('add', lambda F, a, b: a + b, anywhere, anywhere),
    Op('add alpha', lambda F, a, b: a.add(b, alpha=-1.5), anywhere, anywhere),
    Op('sub', lambda F, a, b: a - b, anywhere, anywhere),
    Op('mul', lambda F, a, b: a * b, anywhere, anywhere),
    Op('div', lambda F, a, b: a / b, anywhere, nonzero),
    Op('pow', lambda F, a, b: a ** b, positive, anywhere),
    Op('maximum', lambda F, a, b: a.maximum(b), anywhere, anywhere),
    Op('minimum', lambda F, a, b: a.minimum(b), anywhere, anywhere),
    Op('where', lambda F, a, b: a.where(a > 0, b), anywhere, anywhere),
    Op('mixed', lambda F, a, b: (a * b).exp() - a / (1.5 + b.tanh()), anywhere, anywhere),
]

UNARY = [
    Op('neg', lambda F, x: -x, anywhere),
    Op('rsub', lambda F, x: 1.5 - x, anywhere),
    Op('rtruediv', lambda F, x: 2.0 / x, nonzero),
    Op('pow 3', lambda F, x: x ** 3, anywhere),
    Op('pow 2.5', lambda F, x: x.pow(2.5), positive),
    Op('pow -0.5', lambda F, x: x ** -0.5, positive),
    Op('pow 0', lambda F, x: x ** 0, anywhere),
    Op('rpow', lambda F, x: 2.0 ** x, anywhere),
    Op('exp', lambda F, x: x.exp(), anywhere),
    Op('log', lambda F, x: x.log(), positive),
    Op('log1p', lambda F, x: x.log1p(), above_minus_one),
    Op('sqrt', lambda F, x: x.sqrt(), positive),
    Op('rsqrt', lambda F, x: x.rsqrt(), positive),
    Op('abs', lambda F, x: x.abs(), anywhere),
    Op('sign', lambda F, x: x.sign(), anywhere),
    Op('sin', lambda F, x: x.sin(), anywhere),
    Op('cos', lambda F, x: x.cos(), anywhere),
    Op('tanh', lambda F, x: x.tanh(), wide),
    Op('sigmoid', lambda F, x: x.sigmoid(), wide),
    Op('relu', lambda F, x: x.relu(), anywhere),
    Op('clamp', lambda F, x: x.clamp(-0.5, 0.5), anywhere),
    Op('clamp min', lambda F, x: x.clamp(min=0.0), anywhere),
    Op('clamp max', lambda F, x: x.clamp(max=-0.5), anywhere),
    Op('reciprocal', lambda F, x: x.reciprocal(), nonzero),
    Op('square', lambda F, x: x.square(), anywhere),
    Op('erf', lambda F, x: x.erf(), anywhere),
    Op('leaky_relu', lambda F, x: F.leaky_relu(x, 0.1), anywhere),
    Op('hardtanh', lambda F, x: F.hardtanh(x), anywhere),
    Op('relu6', lambda F, x: F.relu6(x * 3), anywhere),
    # PyTorch's backward of these two multiplies by 1/6 rounded to float32, even in float64
    Op('hardsigmoid', lambda F, x: F.hardsigmoid(x), anywhere, grad_rtol=float(np.finfo(np.float32).eps)),
    Op('hardswish', lambda F, x: F.hardswish(x), anywhere, grad_rtol=float(np.finfo(np.float32).eps)),
    Op('elu', lambda F, x: F.elu(x, 0.7), anywhere),
    Op('selu', lambda F, x: F.selu(x), anywhere),
    Op('celu', lambda F, x: F.celu(x, 1.3), anywhere, grad_rtol=float(np.finfo(np.float32).eps)),  # PyTorch's slope is float32-rounded too
    Op('softplus', lambda F, x: F.softplus(x, beta=2.0, threshold=3.0), wide),
    Op('logsigmoid', lambda F, x: F.logsigmoid(x), wide),
    Op('gelu', lambda F, x: F.gelu(x), anywhere),
    Op('gelu tanh', lambda F, x: F.gelu(x, approximate='tanh'), anywhere),
    Op('silu', lambda F, x: F.silu(x), wide),
    Op('mish', lambda F, x: F.mish(x), wide),
    Op('softsign', lambda F, x: F.softsign(x), anywhere),
    Op('tanhshrink', lambda F, x: F.tanhshrink(x), anywhere),
    Op('softshrink', lambda F, x: F.softshrink(x, 0.5), anywhere),
    Op('hardshrink', lambda F, x: F.hardshrink(x, 0.5), anywhere),
    Op('threshold', lambda F, x: F.threshold(x, 0.5, -2.0), anywhere),
]

COMPARISONS = [Op('==', lambda F, a, b: a == b), Op('!=', lambda F, a, b: a != b), Op('<', lambda F, a, b: a < b),
               Op('<=', lambda F, a, b: a <= b), Op('>', lambda F, a, b: a > b), Op('>=', lambda F, a, b: a >= b)]

shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4)


@pytest.mark.parametrize('op', UNARY, ids=str)
@fuzz(60, cases=len(UNARY))
@given(shape=shapes, seed=seeds, grid=st.booleans())
def test_unary(op, shape, seed, grid):
    rng = np.random.default_rng(seed)
    differential(op.mine, op.torch, [op.domains[0](rng, shape, grid)], seed, grad_rtol=op.grad_rtol)


@pytest.mark.parametrize('op', BINARY, ids=str)
@fuzz(140, cases=len(BINARY))
@given(shapes=pairs, seed=seeds, grid=st.booleans())
def test_binary_numpy_policy(op, shapes, seed, grid):
    "Under NumPy's rules every broadcastable pair must give PyTorch's values and gradients (summed back to each shape)."
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    with broadcast_policy('numpy'):
        differential(op.mine, op.torch, [op.domains[0](rng, sa, grid), op.domains[1](rng, sb, grid)], seed)


@pytest.mark.parametrize('op', COMPARISONS, ids=str)
@fuzz(75, cases=len(COMPARISONS))
@given(shapes=pairs, seed=seeds, grid=st.booleans())
def test_comparisons(op, shapes, seed, grid):
    rng = np.random.default_rng(seed)
    arrays = [anywhere(rng, s, grid) for s in shapes.input_shapes]
    with broadcast_policy('numpy'):
        out = differential(op.mine, op.torch, arrays, seed)[0]
    assert out.dtype == np.bool_ and not out.requires_grad


# --- strict broadcasting: raises exactly for the ambiguous alignments, agrees with PyTorch otherwise
def ambiguous(sa, sb):
    "Ranks differ, the shorter operand has more than one element, and it fits the longer one at more than one position."
    if len(sa) == len(sb): return False
    small, big = (sa, sb) if len(sa) < len(sb) else (sb, sa)
    if math.prod(small) <= 1: return False
    fits = sum(all(s == w or s == 1 or w == 1 for s, w in zip(small, big[p:p + len(small)]))
               for p in range(len(big) - len(small) + 1))
    return fits > 1


@st.composite
def shape_pairs(draw):
    "Pairs that broadcast, independent pairs (mostly not), and windows cut from a shape (where ambiguity lives)."
    kind = draw(st.sampled_from(['broadcastable', 'independent', 'window']))
    if kind == 'broadcastable': return tuple(draw(pairs).input_shapes)
    small_sides = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=3)
    if kind == 'independent': return draw(small_sides), draw(small_sides)
    big = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3))
    start = draw(st.integers(0, len(big) - 1))
    stop = draw(st.integers(start, len(big)))
    small = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else n for n in big[start:stop])
    return (small, big) if draw(st.booleans()) else (big, small)


@fuzz(1200)
@given(pair=shape_pairs(), op=st.sampled_from(BINARY + COMPARISONS), seed=seeds)
def test_strict_policy(pair, op, seed):
    """Strict (the default): BroadcastError exactly when PyTorch refuses or the alignment is ambiguous, PyTorch's
    values and gradients otherwise. NumPy's policy: an error exactly when PyTorch refuses."""
    sa, sb = pair
    rng = np.random.default_rng(seed)
    doms = op.domains or (anywhere, anywhere)
    arrays = [doms[0](rng, sa, False), doms[1](rng, sb, False)]
    refused = torch_raises(op.torch, arrays)
    for policy in ('strict', 'numpy'):
        with broadcast_policy(policy):
            if refused or (policy == 'strict' and ambiguous(sa, sb)):
                with pytest.raises(BroadcastError, match=r'cannot .*shapes'):
                    op.mine(*[tensor(a) for a in arrays])
            else:
                differential(op.mine, op.torch, arrays, seed)


def test_the_ambiguity_predicate():
    "The predicate of test_strict_policy, on the cases the book discusses."
    assert ambiguous((3, 3), (3,)) and ambiguous((3,), (3, 3))
    assert not ambiguous((2, 3), (3,))          # fits only at the end
    assert not ambiguous((3, 3), (1,)) and not ambiguous((3, 3), ())
    assert ambiguous((2, 2, 2), (2, 2)) and not ambiguous((2, 2), (2, 2))


# --- dtypes: PyTorch's type promotion, for tensors of every dtype and Python numbers
DTYPES = ['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64']
NUMBERS = ['py_int', 'py_float', 'py_bool']
PROMOTING = [Op('add', lambda F, a, b: a + b), Op('sub', lambda F, a, b: a - b), Op('mul', lambda F, a, b: a * b),
             Op('div', lambda F, a, b: a / b), Op('maximum', lambda F, a, b: a.maximum(b)),
             Op('where', lambda F, a, b: a.where(a > 0, b)), Op('pow', lambda F, a, b: a ** b)] + COMPARISONS


def operand(rng, kind, shape):
    "An array of dtype `kind` with small positive values, or a Python number ('py_int', 'py_float', 'py_bool')."
    if kind == 'py_int': return int(rng.integers(1, 4))
    if kind == 'py_float': return float(rng.choice([0.5, 1.5, 2.0]))
    if kind == 'py_bool': return bool(rng.integers(0, 2))
    if kind == 'bool': return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(1, 4, shape).astype(kind)


@fuzz(700)
@given(op=st.sampled_from(PROMOTING), a=st.sampled_from(DTYPES), b=st.sampled_from(DTYPES + NUMBERS),
       shape=hnp.array_shapes(min_dims=0, max_dims=2, max_side=3), seed=seeds)
def test_type_promotion(op, a, b, shape, seed):
    "The result dtype and value of a binary op for every pair of dtypes, and a refusal where PyTorch refuses."
    rng = np.random.default_rng(seed)
    x, y = operand(rng, a, shape), operand(rng, b, shape)
    if op.name == 'div' and b == 'bool': y = np.ones_like(y)   # x / False raises under the default math policy
    if op.name == 'div' and b == 'py_bool': y = True
    number = b in NUMBERS
    mine = lambda: op.mine(tensor(x), y if number else tensor(y))
    try: theirs = op.torch(torch.tensor(x), y if number else torch.tensor(y))
    except Exception as e:
        with pytest.raises(Exception): mine()
        return
    assert_close(mine(), theirs, f"{op} of {a} and {b}")


# --- the 'nan' math policy: PyTorch's nan and inf at the edges of every domain
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 40.0, 800.0, -800.0, 1e-310, INF, -INF, float('nan')]
NAN_UNARY = [Op(n, f) for n, f in [
    ('log', lambda F, x: x.log()), ('log1p', lambda F, x: x.log1p()), ('sqrt', lambda F, x: x.sqrt()),
    ('rsqrt', lambda F, x: x.rsqrt()), ('reciprocal', lambda F, x: x.reciprocal()), ('exp', lambda F, x: x.exp()),
    ('pow -1.5', lambda F, x: x ** -1.5), ('pow 0.5', lambda F, x: x ** 0.5), ('rpow', lambda F, x: (-2.0) ** x),
    ('tanh', lambda F, x: x.tanh()), ('sigmoid', lambda F, x: x.sigmoid()), ('sin', lambda F, x: x.sin()),
    ('abs', lambda F, x: x.abs()), ('relu', lambda F, x: x.relu()), ('square', lambda F, x: x.square()),
    ('softplus', lambda F, x: F.softplus(x)), ('logsigmoid', lambda F, x: F.logsigmoid(x)), ('gelu', lambda F, x: F.gelu(x)),
    ('silu', lambda F, x: F.silu(x)), ('elu', lambda F, x: F.elu(x)), ('erf', lambda F, x: x.erf())]]
NAN_BINARY = [Op(n, f) for n, f in [
    ('add', lambda F, a, b: a + b), ('sub', lambda F, a, b: a - b), ('mul', lambda F, a, b: a * b),
    ('div', lambda F, a, b: a / b), ('pow', lambda F, a, b: a ** b), ('maximum', lambda F, a, b: a.maximum(b))]]


# Where MyTorch's gradient is not yet PyTorch's (reported): these edge values are left out for these ops until it is.
NAN_GAPS = {'abs': [float('nan')], 'elu': [float('nan')], 'pow 0.5': [-0.0, -INF]}


@fuzz(400)
@given(op=st.sampled_from(NAN_UNARY + NAN_BINARY), data=st.data())
def test_nan_policy_edges(op, data):
    "Under set_math_policy('nan'), values and gradients at 0, +-inf, nan, huge and subnormal inputs are PyTorch's."
    arity = 2 if op in NAN_BINARY else 1
    same = lambda e, g: (e != e and g != g) or (e == g and math.copysign(1, e) == math.copysign(1, g))
    edges = [e for e in EDGES if not any(same(e, g) for g in NAN_GAPS.get(op.name, []))]
    arrays = [np.array(data.draw(st.lists(st.sampled_from(edges), min_size=1, max_size=6)), dtype=np.float64)]
    if arity == 2:
        divisors = [e for e in EDGES if op.name != 'div' or e != 1e-310]   # a subnormal divisor (reported)
        arrays.append(np.array(data.draw(st.lists(st.sampled_from(divisors), min_size=len(arrays[0]),
                                                  max_size=len(arrays[0]))), dtype=np.float64))
    with set_math_policy('nan'):
        differential(op.mine, op.torch, arrays, seed=0)


# ---------------------------------------------------------------- reductions
# Half the inputs are small integers, so that ties (amax, max, norm(inf)), zeros (prod) and zero slices (norm,
# std) are frequent. Value, gradient and second derivative (the gradient of <w, gradient>) are compared.
@st.composite
def reduction_inputs(draw, min_size=1, max_ndim=4):
    "A float64 array: normal numbers, or small integers (ties, zeros) half the time."
    shape = tuple(draw(st.lists(st.integers(min_size, 4), min_size=0, max_size=max_ndim)))
    rng = np.random.default_rng(draw(seeds))
    if draw(st.booleans()): return rng.integers(-2, 3, shape).astype(np.float64)
    return rng.standard_normal(shape)


@st.composite
def dims(draw, ndim):
    "None, (), one dim (maybe negative) or a tuple of distinct dims (maybe negative, any order)."
    n = max(ndim, 1)
    kind = draw(st.sampled_from(['all', 'one'] + (['tuple'] if ndim else [])))
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


def reduced(a, dim):
    "How many numbers one output of a reduction over `dim` combines."
    return math.prod(a.shape[i] for i in axes_of(dim, a.ndim))


def second_order(f, f_torch, a, seed, n, second_nan_ok=None, cond=None):
    "Value, gradient and second derivative of f at `a` against PyTorch's f_torch; `cond(y)`: the second derivative's condition number."
    x, xt = tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, yt = f(x), f_torch(xt)
    scale = float(np.abs(a).max(initial=0.0))
    assert_close(y, yt, "value", n=n, scale=scale)
    rng = np.random.default_rng(seed)
    v, w = rng.standard_normal(y.shape), rng.standard_normal(a.shape)
    g, = grad(y, x, grad_outputs=tensor(v), create_graph=True)
    gt, = torch.autograd.grad(yt, xt, torch.tensor(v), create_graph=True)
    assert_close(g, gt, "gradient", n=n, scale=3 * max(scale, 1))
    h = grad(g, x, grad_outputs=tensor(w), allow_unused=True)[0] if g.requires_grad else None
    ht = torch.autograd.grad(gt, xt, torch.tensor(w), allow_unused=True)[0] if gt.requires_grad else None
    h = np.zeros(a.shape) if h is None else h.numpy()
    ht = np.zeros(a.shape) if ht is None else ht.detach().numpy(force=True)
    assert_close(h, ht, "second derivative", n=n * n, scale=9 * max(scale, 1) * (cond(yt) if cond else 1.0),
                 nan_ok=second_nan_ok(x) if second_nan_ok else None)


def kept(y, dims, keepdim):
    "PyTorch's keepdim=True result squeezed by hand (for ops composed from single-dim calls)."
    return y if keepdim else y.reshape([n for i, n in enumerate(y.shape) if i not in dims])


def torch_prod(t, dim, keepdim):
    "PyTorch's prod takes one int dim: a tuple is a product per dim."
    ax = axes_of(dim, t.ndim)
    for d in sorted(ax, reverse=True): t = t.prod(d, keepdim=True)
    return kept(t, ax, keepdim)


@fuzz(300)
@given(data=st.data())
def test_sum_mean_prod(data):
    a = data.draw(reduction_inputs())
    dim, keepdim, seed = data.draw(dims(a.ndim)), data.draw(st.booleans()), data.draw(seeds)
    n = reduced(a, dim)
    second_order(lambda t: t.sum(dim, keepdim), lambda t: t.sum(dim=dim, keepdim=keepdim), a, seed, n)
    second_order(lambda t: t.mean(dim, keepdim=keepdim), lambda t: t.mean(dim=dim, keepdim=keepdim), a, seed, n)
    second_order(lambda t: t.prod(dim, keepdim), lambda t: torch_prod(t, dim, keepdim), a, seed, n,
                 cond=lambda yt: prod_cond(a, dim))


def prod_cond(a, dim) -> float:
    """The second derivative's condition for prod: PyTorch's double backward divides the product by the
    elements, so its rounding grows like max |prod(slice)| / x^2 (a one-element slice gives 1 / |x|)."""
    y = np.prod(a, axis=axes_of(dim, a.ndim), keepdims=True)
    with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
        r = np.abs(y) / (a * a)
    r = r[np.isfinite(r)]
    return max(1.0, float(r.max(initial=0.0)))


@fuzz(300)
@given(data=st.data())
def test_max_min_argmax(data):
    a = data.draw(reduction_inputs())
    dim, keepdim, seed = data.draw(dims(a.ndim)), data.draw(st.booleans()), data.draw(seeds)
    n, tdim = reduced(a, dim), () if dim is None else dim
    second_order(lambda t: t.amax(dim, keepdim), lambda t: t.amax(tdim, keepdim), a, seed, n)
    second_order(lambda t: t.amin(dim, keepdim), lambda t: t.amin(tdim, keepdim), a, seed, n)
    second_order(lambda t: t.max(), lambda t: t.max(), a, seed, a.size)
    second_order(lambda t: t.min(), lambda t: t.min(), a, seed, a.size)
    d = data.draw(st.integers(-max(a.ndim, 1), max(a.ndim, 1) - 1))
    for op in ('max', 'min'):
        mine, theirs = getattr(tensor(a), op)(d, keepdim), getattr(torch.tensor(a), op)(d, keepdim)
        assert_close(mine.indices, theirs.indices, f"{op}(dim).indices")
        second_order(lambda t: getattr(t, op)(d, keepdim=keepdim).values,
                     lambda t: getattr(t, op)(d, keepdim=keepdim).values, a, seed, a.shape[d] if a.ndim else 1)
    for op in ('argmax', 'argmin'):
        assert_close(getattr(tensor(a), op)(d, keepdim), getattr(torch.tensor(a), op)(d, keepdim), f"{op}(dim)")
        assert_close(getattr(tensor(a), op)(), getattr(torch.tensor(a), op)(), f"{op}()")


@fuzz(300)
@given(data=st.data())
def test_var_std(data):
    a = data.draw(reduction_inputs())
    dim, keepdim, seed = data.draw(dims(a.ndim)), data.draw(st.booleans()), data.draw(seeds)
    style = data.draw(st.sampled_from(['default', 'correction', 'unbiased']))
    if style == 'correction':
        c = data.draw(st.sampled_from([0, 1, 2, 0.5]))
        mine, theirs = dict(correction=c), dict(correction=c)
    elif style == 'unbiased':
        u = data.draw(st.booleans())
        c, mine, theirs = int(u), dict(unbiased=u), dict(unbiased=u)
    else: c, mine, theirs = 1, {}, {}
    n = reduced(a, dim)
    tdim = None if dim == () else dim   # torch's unbiased= overloads want an int or a tuple
    for op in ('var', 'std'):
        f = lambda t: getattr(t, op)(dim, keepdim=keepdim, **mine)
        if n - c <= 0:   # PyTorch returns nan or inf here; MyTorch's default math policy refuses
            with pytest.raises((RuntimeError, DomainError), match="n - correction"): f(tensor(a, requires_grad=True))
            continue
        # std's second derivative subtracts terms of size |x - mean|^2 / std^3 and 1 / std: rounding grows as (|x| / std)^2
        cond = (lambda y: min(1e12, max(1.0, float(np.abs(a).max(initial=0.0)) / max(float(y.detach().abs().min()), 1e-150)) ** 2)) if op == 'std' else None
        second_order(f, lambda t: getattr(t, op)(tdim, keepdim=keepdim, **theirs), a, seed, n, cond=cond)


@fuzz(250)
@given(data=st.data())
def test_logsumexp_cumsum(data):
    a = data.draw(reduction_inputs())
    dim, keepdim, seed = data.draw(dims(a.ndim)), data.draw(st.booleans()), data.draw(seeds)
    scale = data.draw(st.sampled_from([1.0, 1000.0]))   # 1000: the shift must keep it finite
    second_order(lambda t: t.logsumexp(() if dim is None else dim, keepdim),
                 lambda t: t.logsumexp(torch_dims(dim, a.ndim), keepdim), a * scale, seed, reduced(a, dim))
    d = data.draw(st.integers(-max(a.ndim, 1), max(a.ndim, 1) - 1))
    second_order(lambda t: t.cumsum(d), lambda t: t.cumsum(d), a, seed, a.shape[d] if a.ndim else 1)


@fuzz(300)
@given(data=st.data())
def test_norm(data):
    a = data.draw(reduction_inputs())
    dim, keepdim, seed = data.draw(dims(a.ndim)), data.draw(st.booleans()), data.draw(seeds)
    p = data.draw(st.sampled_from([2, 'fro', 1, INF, -INF]))   # other p: MyTorch refuses (reported)
    ax = axes_of(dim, a.ndim)
    if p == 'fro' and dim is not None and dim != () and len(ax) > 2:
        both_raise(lambda t: t.norm(p, dim), lambda t: t.norm(p, dim), [a], expect=RuntimeError)
        return
    tdim = None if dim == () else dim

    def zero_slice(x):   # PyTorch's second derivative of the 2-norm is nan there, ours 0 (a subgradient)
        n = np.sqrt(np.sum(x.detach().numpy() ** 2, axis=ax, keepdims=True))
        return np.broadcast_to(n == 0, a.shape)
    second_order(lambda t: t.norm(p, dim, keepdim), lambda t: t.norm(p, tdim, keepdim), a, seed, reduced(a, dim),
                 second_nan_ok=zero_slice if p in (2, 'fro') else None)


@fuzz(200)
@given(data=st.data())
def test_reductions_of_empty_tensors_and_bad_dims(data):
    "Empty tensors: PyTorch's values, or a refusal where PyTorch raises or returns nan. Bad dims: IndexError."
    a = data.draw(reduction_inputs(min_size=0, max_ndim=3))
    dim = data.draw(dims(a.ndim))
    x, xt = tensor(a), torch.tensor(a)
    assert_close(x.sum(dim), xt.sum(dim=dim), "sum")
    assert_close(x.prod(dim), torch_prod(xt, dim, False), "prod")
    assert_close(x.norm(2, dim), xt.norm(2, None if dim == () else dim), "norm")
    assert_close(x.logsumexp(() if dim is None else dim), xt.logsumexp(torch_dims(dim, a.ndim)), "logsumexp")
    ax = axes_of(dim, a.ndim)
    n, outputs = math.prod(a.shape[i] for i in ax), math.prod(a.shape[i] for i in range(a.ndim) if i not in ax)
    if n == 0 and outputs > 0:      # 0/0: PyTorch's nan, MyTorch's DomainError
        assert np.isnan(xt.mean(dim=dim).numpy()).all()
        with pytest.raises((RuntimeError, DomainError), match="combines zero elements"): x.mean(dim)
    else: assert_close(x.mean(dim), xt.mean(dim=dim), "mean")
    if n == 0:                      # the max of nothing: both refuse, even when there are no outputs
        with pytest.raises(RuntimeError, match="of no elements is undefined"): x.amax(dim)
        with pytest.raises((RuntimeError, IndexError)): xt.amax(() if dim is None else dim)
    else: assert_close(x.amax(dim), xt.amax(() if dim is None else dim), "amax")
    bad = data.draw(st.sampled_from([max(a.ndim, 1), -max(a.ndim, 1) - 1, 7]))
    with pytest.raises(IndexError, match=f"dim {bad} is out of range for a tensor with {a.ndim} dims"): x.sum(bad)
    with pytest.raises(IndexError): xt.sum(bad)


def test_integer_reductions():
    "Integer sums, products and cumsums are int64 as in PyTorch; mean, var and norm of integers refuse, as in PyTorch."
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    for op in ('sum', 'prod', 'cumsum'):
        assert_close(getattr(tensor(a), op)(1), getattr(torch.tensor(a), op)(1), op)
    for op in ('mean', 'var', 'std', 'norm'):
        with pytest.raises(RuntimeError, match="needs a floating-point tensor"): getattr(tensor(a), op)()
        with pytest.raises(RuntimeError): getattr(torch.tensor(a), op)()


# ---------------------------------------------------------------- shape ops
# Values and gradients must be exactly PyTorch's (they only move numbers), except where a backward adds up copies
# (repeat, broadcast_to) in an order of its own. Where PyTorch refuses (a view of an incompatible layout, a pad
# that crops too much), MyTorch must refuse too.
sides = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def normal(shape, seed): return np.random.default_rng(seed).standard_normal(shape)


@st.composite
def permuted(draw):
    "An array and a permutation of its dims (a non-contiguous layout, unless the permutation is trivial)."
    shape = draw(sides)
    return normal(shape, draw(seeds)), tuple(draw(st.permutations(range(len(shape)))))


@st.composite
def factorization(draw, n):
    "A random shape with n elements, possibly with 1s and one -1."
    primes, k = [], n
    for p in (2, 3, 5, 7):
        while k % p == 0: primes.append(p); k //= p
    if k > 1: primes.append(k)
    primes = draw(st.permutations(primes))
    out = [1] * draw(st.integers(1, 4))
    for p in primes: out[draw(st.integers(0, len(out) - 1))] *= p
    if draw(st.booleans()): out[draw(st.integers(0, len(out) - 1))] = -1
    return tuple(out)


@fuzz(150)
@given(ap=permuted(), seed=seeds)
def test_permute_transpose_movedim(ap, seed):
    a, p = ap
    n = a.ndim
    differential(lambda x: x.permute(*p), lambda x: x.permute(*p), [a], seed, exact=True)
    d0, d1 = p[0] - n, p[-1]
    differential(lambda x: x.transpose(d0, d1), lambda x: x.transpose(d0, d1), [a], seed, exact=True)
    src, dst = p[: n // 2 + 1], tuple(sorted(p[: n // 2 + 1]))
    differential(lambda x: S.movedim(x, src, dst), lambda x: torch.movedim(x, src, dst), [a], seed, exact=True)
    if n >= 2: differential(lambda x: x.mT, lambda x: x.mT, [a], seed, exact=True)


@fuzz(200)
@given(data=st.data(), ap=permuted(), seed=seeds)
def test_reshape_view_flatten(data, ap, seed):
    a, p = ap
    target = data.draw(factorization(a.size))
    differential(lambda x: x.permute(*p).reshape(target), lambda x: x.permute(*p).reshape(target), [a], seed, exact=True)
    x, xt = tensor(a).permute(*p), torch.tensor(a).permute(*p)
    assert x._data.flags.c_contiguous == xt.is_contiguous()
    try: xt.view(target)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="Use .reshape"): x.view(target)
    else:
        differential(lambda x: x.permute(*p).view(target), lambda x: x.permute(*p).view(target), [a], seed, exact=True)
    start = data.draw(st.integers(0, a.ndim - 1))
    end = data.draw(st.integers(start, a.ndim - 1))
    differential(lambda x: x.flatten(start, end), lambda x: x.flatten(start, end), [a], seed, exact=True)


@fuzz(200)
@given(data=st.data(), shape=sides, seed=seeds)
def test_cat_split_chunk_narrow(data, shape, seed):
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    lengths = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    arrays = [normal(shape[:d % len(shape)] + (n,) + shape[d % len(shape) + 1:], seed + i) for i, n in enumerate(lengths)]
    differential(lambda *xs: S.cat(list(xs), d), lambda *xs: torch.cat(list(xs), d), arrays, seed, exact=True)
    a, n = normal(shape, seed), shape[d]
    size = data.draw(st.integers(1, n + 1))
    differential(lambda x: x.split(size, d), lambda x: x.split(size, d), [a], seed, exact=True)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    sections = [b - c for b, c in zip(cuts + [n], [0] + cuts)]
    differential(lambda x: x.split(sections, d), lambda x: x.split(sections, d), [a], seed, exact=True)
    chunks = data.draw(st.integers(1, 5))
    differential(lambda x: x.chunk(chunks, d), lambda x: x.chunk(chunks, d), [a], seed, exact=True)
    start = cuts[0] if cuts else 0
    differential(lambda x: x.narrow(d, start, n - start), lambda x: x.narrow(d, start, n - start), [a], seed, exact=True)


@fuzz(150)
@given(data=st.data(), shape=sides, seed=seeds)
def test_stack_unbind(data, shape, seed):
    d = data.draw(st.integers(-len(shape) - 1, len(shape)))
    arrays = [normal(shape, seed + i) for i in range(data.draw(st.integers(1, 4)))]
    differential(lambda *xs: S.stack(list(xs), d), lambda *xs: torch.stack(list(xs), d), arrays, seed, exact=True)
    u = data.draw(st.integers(-len(shape), len(shape) - 1))
    differential(lambda x: x.unbind(u), lambda x: x.unbind(u), arrays[:1], seed, exact=True)


@fuzz(200)
@given(data=st.data(), shape=sides, seed=seeds)
def test_pad_constant(data, shape, seed):
    k = data.draw(st.integers(1, len(shape)))
    widths = tuple(data.draw(st.lists(st.integers(-3, 3), min_size=2 * k, max_size=2 * k)))
    value = data.draw(st.sampled_from([0.0, -1.5, 2.0]))
    a = normal(shape, seed)
    if torch_raises(lambda x: TF.pad(x, widths, value=value), [a]):
        both_raise(lambda x: S.pad(x, widths, value=value), lambda x: TF.pad(x, widths, value=value), [a], expect=RuntimeError)
        return
    differential(lambda x: S.pad(x, widths, value=value), lambda x: TF.pad(x, widths, value=value), [a], seed, exact=True)


@fuzz(150)
@given(data=st.data(), shape=sides, seed=seeds)
def test_flip_repeat_tril(data, shape, seed):
    a = normal(shape, seed)
    fl = tuple(data.draw(st.sets(st.integers(0, len(shape) - 1))))
    differential(lambda x: x.flip(fl), lambda x: x.flip(fl), [a], seed, exact=True)
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape) + 2)))
    differential(lambda x: x.repeat(*reps), lambda x: x.repeat(*reps), [a], seed)
    if len(shape) >= 2:
        k = data.draw(st.integers(-4, 4))
        differential(lambda x: x.triu(k), lambda x: x.triu(k), [a], seed, exact=True)
        differential(lambda x: x.tril(k), lambda x: x.tril(k), [a], seed, exact=True)


@fuzz(150)
@given(data=st.data(), shape=st.lists(st.integers(1, 3), min_size=0, max_size=4).map(tuple), seed=seeds)
def test_squeeze_unsqueeze_broadcast_to(data, shape, seed):
    a = normal(shape, seed)
    differential(lambda x: x.squeeze(), lambda x: x.squeeze(), [a], seed, exact=True)
    if shape:
        sq = tuple(d - len(shape) * data.draw(st.booleans()) for d in data.draw(st.sets(st.integers(0, len(shape) - 1))))
        differential(lambda x: x.squeeze(sq), lambda x: x.squeeze(sq), [a], seed, exact=True)
    u = data.draw(st.integers(-len(shape) - 1, len(shape)))
    differential(lambda x: x.unsqueeze(u), lambda x: x.unsqueeze(u), [a], seed, exact=True)
    lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    target = lead + tuple(data.draw(st.integers(1, 3)) if n == 1 else n for n in shape)
    differential(lambda x: S.broadcast_to(x, target), lambda x: torch.broadcast_to(x, target), [a], seed)


# ---------------------------------------------------------------- matmul and einsum
size = st.integers(0, 3)          # 0 exercises empty products and empty sums
batch_size = st.integers(1, 3)


@st.composite
def batch_pair(draw):
    "Two batch shapes that broadcast: suffixes of one full batch shape, with some entries set to 1."
    full = draw(st.lists(batch_size, min_size=0, max_size=3))
    def one():
        part = full[len(full) - draw(st.integers(0, len(full))):]
        return tuple(1 if draw(st.booleans()) else n for n in part)
    return one(), one()


@st.composite
def matmul_shapes(draw):
    "Shapes (a, b) for a @ b, from every case of PyTorch's rules; now and then with mismatched inner sizes."
    n, k, m = draw(size), draw(size), draw(size)
    k2 = k + 1 if draw(st.integers(0, 9)) == 0 else k
    kind = draw(st.sampled_from(['1x1', '2x1', '1x2', '1xN', 'Nx1', '2x2', 'batched']))
    ba, bb = draw(batch_pair())
    if kind == '1x1': return (k,), (k2,)
    if kind == '2x1': return (n, k), (k2,)
    if kind == '1x2': return (k,), (k2, m)
    if kind == '1xN': return (k,), bb + (k2, m)
    if kind == 'Nx1': return ba + (n, k), (k2,)
    if kind == '2x2': return (n, k), (k2, m)
    return ba + (n, k), bb + (k2, m)


def arrays_of(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


@fuzz(500)
@given(shapes=matmul_shapes(), seed=seeds)
def test_matmul(shapes, seed):
    arrays = arrays_of(shapes, seed)
    if torch_raises(lambda a, b: a @ b, arrays):
        both_raise(lambda a, b: a @ b, lambda a, b: a @ b, arrays)
        return
    differential(lambda a, b: a @ b, lambda a, b: a @ b, arrays, seed, n=shapes[0][-1] if shapes[0] else 1)


# an equation, or a '...' one whose batch broadcasts
EQUATIONS = ['ij,jk->ik', 'bij,bjk->bik', 'i,i->', 'i,j->ij', 'ij->ji', 'ij->', 'ij->j', 'ii->i', 'ii->',
             'iij->ij', 'ij,jk,kl->il', 'bij,jk->bik', 'ik,kj', 'ij,ij->ij', 'bhqd,bhkd->bhqk', 'ii,i->i',
             '...ij,...jk->...ik', '...ij->...ji', 'i...->...']


@st.composite
def einsum_case(draw):
    "An equation from EQUATIONS and operand shapes for it (letters sized 1-3, '...' a broadcast batch)."
    eq = draw(st.sampled_from(EQUATIONS))
    lhs = eq.split('->')[0].split(',')
    sizes = {c: draw(st.integers(1, 3)) for c in set(eq) if c.isalpha()}
    ell = draw(batch_pair())
    shapes = []
    for i, s in enumerate(lhs):
        parts = [tuple(sizes[c] for c in part) for part in s.split('...')]
        shapes.append(parts[0] + ell[i % 2] + parts[1] if '...' in s else parts[0])
    return eq, shapes


@fuzz(350)
@given(case=einsum_case(), seed=seeds)
def test_einsum(case, seed):
    eq, shapes = case
    differential(lambda *xs: einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs), arrays_of(shapes, seed), seed, n=27)


def test_einsum_refuses_mismatched_sizes_like_torch():
    mine, _ = both_raise(lambda a, b: einsum('ij,jk->ik', a, b), lambda a, b: torch.einsum('ij,jk->ik', a, b),
                         [np.ones((2, 3)), np.ones((4, 2))])
    assert "letter 'j' has size 4" in str(mine)


# ---------------------------------------------------------------- indexing: x[key] and x[key] = v
# A key is a tuple of items, each drawn as a recipe and built for each library (index tensors are tensors of that
# library): integers (now and then out of range), slices (any start and stop, steps 1-3, now and then a negative
# step, which PyTorch refuses), None, one Ellipsis, integer tensors and lists (repeats, negative entries, shapes that
# broadcast), boolean masks over one or more dims, and the Python bools True/False.
def lenient(a, km, kt) -> bool:
    """PyTorch checks no bounds where the key selects nothing; MyTorch does. Such a key with an index out of range
    (which MyTorch reports as an IndexError) is not compared."""
    try:
        if torch.tensor(a)[kt].numel(): return False
    except Exception: return False
    try: tensor(a)[km]
    except IndexError as e: return 'out of bounds' in str(e)
    return False


@st.composite
def index_recipe(draw, shape, negative_steps=True):
    """A list of items: ('int', i), ('slice', s), ('none',), ('ellipsis',), ('ints', array), ('list', list),
    ('mask', array) or ('bool', b)."""
    items, d, used_ellipsis = [], 0, False
    rng = np.random.default_rng(draw(seeds))
    adv_shape = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    for _ in range(draw(st.integers(0, 4))):
        kinds = ['none', 'bool'] + (['ellipsis'] if not used_ellipsis else [])
        if d < len(shape): kinds += ['int', 'slice', 'slice', 'ints', 'ints', 'list', 'mask']
        kind = draw(st.sampled_from(kinds))
        n = shape[d] if d < len(shape) else 0
        if kind == 'int':
            i = draw(st.integers(-n - 1, n)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(-n, n - 1)) if n else 0
            items.append(('int', i)); d += 1
        elif kind == 'slice':
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            backwards = negative_steps and draw(st.integers(0, 9)) == 0
            step = draw(st.sampled_from([None, 1, 2, 3] + ([-1, -2] if backwards else [])))
            items.append(('slice', slice(draw(bound), draw(bound), step))); d += 1
        elif kind in ('ints', 'list'):
            sh = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else s for s in adv_shape)
            hi = n + 1 if draw(st.integers(0, 14)) == 0 else n     # now and then out of range
            arr = rng.integers(-n, hi, sh) if n or hi else np.zeros(sh, np.int64)
            if kind == 'list': items.append(('list', arr.reshape(-1).tolist()))
            else: items.append(('ints', arr.astype(np.int64)))
            d += 1
        elif kind == 'mask':
            k = draw(st.integers(1, len(shape) - d))
            items.append(('mask', rng.integers(0, 2, shape[d:d + k]).astype(bool))); d += k
        elif kind == 'ellipsis':
            items.append(('ellipsis',)); used_ellipsis = True; d = len(shape) if draw(st.booleans()) else d
        elif kind == 'none': items.append(('none',))
        else: items.append(('bool', draw(st.booleans())))
    return items


def build_key(recipe, lib):
    "The key of `recipe` for 'mytorch' or 'torch' (a single item stays bare, as in x[i])."
    make = tensor if lib == 'mytorch' else torch.tensor
    out = []
    for item in recipe:
        kind = item[0]
        if kind in ('int', 'slice', 'list', 'bool'): out.append(item[1])
        elif kind == 'none': out.append(None)
        elif kind == 'ellipsis': out.append(Ellipsis)
        else: out.append(make(item[1]))
    return out[0] if len(out) == 1 else tuple(out)


def negative_step(recipe) -> bool:
    "Does the key hold a slice with a negative step (which PyTorch refuses)?"
    return any(item[0] == 'slice' and (item[1].step or 1) < 0 for item in recipe)


@fuzz(1400)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4), data=st.data(), seed=seeds)
def test_getitem(shape, data, seed):
    "x[key]: PyTorch's values, shape and gradient (repeated positions add up), or PyTorch's refusal."
    recipe = data.draw(index_recipe(shape))
    a = normal(shape, seed)
    km, kt = build_key(recipe, 'mytorch'), build_key(recipe, 'torch')
    assume(not lenient(a, km, kt))
    if torch_raises(lambda x: x[kt], [a]):
        mine, theirs = both_raise(lambda x: x[km], lambda x: x[kt], [a])
        # the same kind of error; with several faults in one key, each library may name a different one first
        kinds = (type(theirs), ValueError) if negative_step(recipe) else type(theirs)
        assert isinstance(mine, kinds) or isinstance(theirs, RuntimeError), (mine, theirs)
        return
    differential(lambda x: x[km], lambda x: x[kt], [a], seed, exact=True)


def positions(shape, kt):
    "The flat positions of tensor(shape)[key], by PyTorch."
    return torch.arange(math.prod(shape)).reshape(shape)[kt].reshape(-1)


@fuzz(1400)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4), data=st.data(), seed=seeds)
def test_setitem(shape, data, seed):
    """y = x.clone(); y[key] = v: PyTorch's values and the gradients to both x (zero where overwritten) and v (summed
    over where it was broadcast), or PyTorch's refusal. v is a tensor of x[key]'s shape, a shape that broadcasts to it,
    or a number; where the key writes a position twice, v is constant along the writes (else the result is undefined)."""
    recipe = data.draw(index_recipe(shape))
    km, kt = build_key(recipe, 'mytorch'), build_key(recipe, 'torch')
    a = normal(shape, seed)
    assume(not lenient(a, km, kt))
    try: target = tuple(torch.tensor(a)[kt].shape)
    except Exception: target = None
    if target is None or negative_step(recipe):
        for make, key, tv in ((torch.tensor, kt, torch.tensor), (tensor, km, tensor)):
            y = make(a)
            with pytest.raises((IndexError, ValueError, RuntimeError, TypeError)): y[key] = tv(np.ones(()))
        return
    pos = positions(shape, kt)
    repeats = len(pos) != len(torch.unique(pos))
    kind = data.draw(st.sampled_from(['same', 'broadcast', 'number']))
    if kind == 'number':
        value = data.draw(st.sampled_from([0.0, -2.5, 3]))
        def f(x): y = x.clone(); y[km] = value; return y
        def ft(x): y = x.clone(); y[kt] = value; return y
        differential(f, ft, [a], seed, exact=True)
        return
    vshape = target
    if kind == 'broadcast' or repeats:   # drop leading dims, set some to 1 (all of them when positions repeat)
        vshape = target[data.draw(st.integers(0, len(target))):]
        vshape = tuple(1 if repeats or draw_bool else s for s, draw_bool in
                       zip(vshape, data.draw(st.lists(st.booleans(), min_size=len(vshape), max_size=len(vshape)))))
    v = normal(vshape, seed + 1)
    def f(x, v): y = x.clone(); y[km] = v; return y
    def ft(x, v): y = x.clone(); y[kt] = v; return y
    differential(f, ft, [a, v], seed, exact=not repeats and kind == 'same')


@fuzz(200)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), data=st.data(), seed=seeds)
def test_setitem_refusals(shape, data, seed):
    "Writing into a leaf that requires grad, or into a view of one, is refused by both libraries."
    recipe = data.draw(index_recipe(shape, negative_steps=False))
    km, kt = build_key(recipe, 'mytorch'), build_key(recipe, 'torch')
    a = normal(shape, seed)
    assume(not torch_raises(lambda x: x[kt], [a]) and torch.tensor(a)[kt].numel() > 0)   # PyTorch lets an empty write pass
    x, xt = tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match='leaf'): xt[kt] = 1.0
    with pytest.raises(RuntimeError, match='leaf'): x[km] = 1.0


# ---------------------------------------------------------------- softmax, log_softmax and the cross-entropy family
@fuzz(350)
@given(x=reduction_inputs(), data=st.data(), scale=st.sampled_from([1.0, 30.0, 1000.0]), seed=seeds)
def test_softmax_log_softmax(x, data, scale, seed):
    "softmax, log_softmax and softmin along any dim, stable at scores of 1000."
    n = max(x.ndim, 1)
    dim = data.draw(st.integers(-n, n - 1))
    op = data.draw(st.sampled_from(['softmax', 'log_softmax', 'softmin', 'method softmax', 'method log_softmax']))
    if op.startswith('method'):
        f = lambda t: getattr(t, op.split()[1])(dim)
        differential(f, f, [x * scale], seed, n=x.shape[dim] if x.ndim else 1)
    else:
        differential(lambda t: getattr(MF, op)(t, dim), lambda t: getattr(TF, op)(t, dim), [x * scale], seed,
                     n=x.shape[dim] if x.ndim else 1)


@st.composite
def classification(draw):
    "(scores, batch shape, C): (C,) unbatched, (N, C), or (N, C, d1[, d2]); N may be 0, C >= 1."
    C = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(['unbatched', 'batch', 'batch', 'spatial']))
    if kind == 'unbatched': batch = ()
    else: batch = (draw(st.integers(0, 3)),) + tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
                                                      if kind == 'spatial' else [])
    shape = batch[:1] + (C,) + batch[1:]
    rng = np.random.default_rng(draw(seeds))
    return rng.standard_normal(shape) * draw(st.sampled_from([1.0, 10.0])), batch, C, rng


def class_targets(rng, batch, C, ignore_index, p_ignored):
    "Class indices of shape `batch`, each replaced by ignore_index with probability p_ignored."
    t = rng.integers(0, C, batch)
    return np.where(rng.random(batch) < p_ignored, ignore_index, t).astype(np.int64)


def loss_case(f, ft, arrays, seed, grad_of, n):
    """A loss against PyTorch. A 'mean' over zero total weight is 0/0: PyTorch returns nan (with a zero gradient);
    MyTorch raises DomainError by default, and under set_math_policy('nan') returns PyTorch's nan and zero gradient."""
    theirs = ft(*[torch.tensor(a) for a in arrays])
    if theirs.ndim == 0 and torch.isnan(theirs):
        with pytest.raises(DomainError, match="0/0"): f(*[tensor(a) for a in arrays])
        with set_math_policy('nan'): differential(f, ft, arrays, seed, grad_of=grad_of, n=n)
        return
    differential(f, ft, arrays, seed, grad_of=grad_of, n=n)


@fuzz(900)
@given(case=classification(), data=st.data(), seed=seeds)
def test_cross_entropy(case, data, seed):
    """cross_entropy with class indices (ignore_index, weight, label_smoothing, every reduction) or class
    probabilities of the input's shape (differentiable in them too); nll_loss on log_softmax of the same scores."""
    x, batch, C, rng = case
    reduction = data.draw(st.sampled_from(['mean', 'sum', 'none']))
    smoothing = data.draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0]))
    weighted = data.draw(st.booleans())
    w = rng.uniform(0.0, 2.0, C) * (rng.random(C) > 0.2) if weighted else None
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    n = C * max(1, math.prod(batch))
    if data.draw(st.booleans()):    # class indices
        ignore = data.draw(st.sampled_from([-100, 0, C - 1, -1]))
        t = class_targets(rng, batch, C, ignore, data.draw(st.sampled_from([0.0, 0.3, 1.0])))
        kw['ignore_index'] = ignore
        arrays, grad_of = [x, t] + ([w] if weighted else []), [True, False, False]
        f = lambda F: (lambda x, t, *w: F.cross_entropy(x, t, *w, **kw))
        loss_case(f(MF), f(TF), arrays, seed, grad_of, n)
        if smoothing == 0.0:
            g = lambda F: (lambda x, t, *w: F.nll_loss(F.log_softmax(x, 1 if x.ndim > 1 else 0), t, *w,
                                                       reduction=reduction, ignore_index=ignore))
            loss_case(g(MF), g(TF), arrays, seed, grad_of, n)
    else:                            # class probabilities (or any non-negative target, which PyTorch accepts)
        q = rng.random(x.shape) ** 3
        if data.draw(st.booleans()): q = q / q.sum(axis=1 if x.ndim > 1 else 0, keepdims=True).clip(1e-3)
        arrays, grad_of = [x, q] + ([w] if weighted else []), [True, True, False]
        f = lambda F: (lambda x, q, *w: F.cross_entropy(x, q, *w, **kw))
        loss_case(f(MF), f(TF), arrays, seed, grad_of, n)


@fuzz(350)
@given(case=classification(), data=st.data(), seed=seeds)
def test_nll_loss(case, data, seed):
    "nll_loss on any scores (not only log-probabilities), with weights, ignore_index and every reduction."
    x, batch, C, rng = case
    reduction = data.draw(st.sampled_from(['mean', 'sum', 'none']))
    ignore = data.draw(st.sampled_from([-100, 0, 2]))
    t = class_targets(rng, batch, C, ignore, data.draw(st.sampled_from([0.0, 0.3, 1.0])))
    weighted = data.draw(st.booleans())
    arrays = [x, t] + ([rng.uniform(0.0, 2.0, C) * (rng.random(C) > 0.3)] if weighted else [])   # some weights 0
    f = lambda F: (lambda x, t, *w: F.nll_loss(x, t, *w, reduction=reduction, ignore_index=ignore))
    loss_case(f(MF), f(TF), arrays, seed, [True, False, False], C * max(1, math.prod(batch)))


@fuzz(350)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4), data=st.data(), seed=seeds)
def test_binary_cross_entropy(shape, data, seed):
    "binary_cross_entropy on probabilities (0 and 1 included) and with_logits (pos_weight, weight), every reduction."
    rng = np.random.default_rng(seed)
    reduction = data.draw(st.sampled_from(['mean', 'sum', 'none']))
    y = rng.random(shape) if data.draw(st.booleans()) else rng.integers(0, 2, shape).astype(np.float64)
    w = rng.uniform(0.0, 2.0, shape[-1:]) if data.draw(st.booleans()) else None
    if data.draw(st.booleans()):
        x = rng.standard_normal(shape) * data.draw(st.sampled_from([1.0, 30.0]))
        pw = rng.uniform(0.2, 3.0, shape[-1:]) if data.draw(st.booleans()) else None
        f = lambda F: (lambda x, y: F.binary_cross_entropy_with_logits(
            x, y, weight=None if w is None else (tensor(w) if F is MF else torch.tensor(w)), reduction=reduction,
            pos_weight=None if pw is None else (tensor(pw) if F is MF else torch.tensor(pw))))
    else:
        x = rng.uniform(0.02, 0.98, shape)
        f = lambda F: (lambda x, y: F.binary_cross_entropy(
            x, y, weight=None if w is None else (tensor(w) if F is MF else torch.tensor(w)), reduction=reduction))
    differential(f(MF), f(TF), [x, y], seed)


# ---------------------------------------------------------------- convolution
@st.composite
def conv_case(draw):
    "conv1d/conv2d arguments: groups, channels, kernel, stride, padding (ints, tuples, 'same', 'valid'), dilation, bias."
    nd = draw(st.sampled_from([1, 2]))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = draw(st.sampled_from(['int', 'tuple', 'same', 'valid']))
    if padding == 'int': padding = draw(st.integers(0, 2))
    elif padding == 'tuple': padding = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    if padding == 'same' and draw(st.booleans()): stride = (1,) * nd        # PyTorch allows 'same' only at stride 1
    size = tuple(draw(st.integers(1, 7)) for _ in range(nd))
    batch = () if draw(st.integers(0, 4)) == 0 else (draw(st.integers(1, 2)),)
    short = lambda t: t[0] if nd == 1 and draw(st.booleans()) else t         # conv1d also takes plain ints
    return dict(nd=nd, x=batch + (cin,) + size, w=(cout, cin // groups) + kernel, bias=draw(st.booleans()),
                kw=dict(stride=short(stride), padding=short(padding) if isinstance(padding, tuple) else padding,
                        dilation=short(dilation), groups=groups))


@pytest.mark.filterwarnings("ignore:Using padding='same'")   # PyTorch's note on its own speed
@fuzz(1200)
@given(case=conv_case(), seed=seeds)
def test_conv(case, seed):
    "conv1d and conv2d against PyTorch: values and the gradients to input, weight and bias; PyTorch's refusals."
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(case['x']), rng.standard_normal(case['w'])]
    if case['bias']: arrays.append(rng.standard_normal(case['w'][:1]))
    name, kw = f"conv{case['nd']}d", case['kw']
    f = lambda F: (lambda x, w, *b: getattr(F, name)(x, w, *b, **kw))
    if torch_raises(f(TF), arrays):
        both_raise(f(MF), f(TF), arrays)
        return
    n = math.prod(case['w'][1:])   # terms in one output
    differential(f(MF), f(TF), arrays, seed, n=n, grad_n=max(n, math.prod(case['x'])))


# ---------------------------------------------------------------- pooling
def pool_windows(L, k, s, p, d, ceil_mode):
    "PyTorch's number of windows along one dim, and whether one of them lies entirely in the padding."
    span = d * (k - 1) + 1
    out = (-(-(L + 2 * p - span) // s) if ceil_mode else (L + 2 * p - span) // s) + 1
    if ceil_mode and (out - 1) * s >= L + p: out -= 1
    padding_only = any(all(not 0 <= i * s - p + j * d < L for j in range(k)) for i in range(max(out, 0)))
    return out, padding_only


@st.composite
def pool_case(draw):
    "max/avg pool 1d/2d arguments: kernel, stride (None: the kernel), padding, dilation, ceil_mode and the rest."
    nd, kind = draw(st.sampled_from([1, 2])), draw(st.sampled_from(['max', 'avg']))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = None if draw(st.integers(0, 3)) == 0 else tuple(draw(st.integers(1, 3)) for _ in range(nd))
    padding = tuple(draw(st.integers(0, k // 2 + (draw(st.integers(0, 7)) == 0))) for k in kernel)   # > k // 2: refused
    dilation = tuple(draw(st.integers(1, 3)) for _ in range(nd)) if kind == 'max' else (1,) * nd
    ceil_mode = draw(st.booleans())
    size = tuple(draw(st.integers(1, 7)) for _ in range(nd))
    shape = ((draw(st.integers(1, 2)),) if draw(st.integers(0, 3)) else ()) + (draw(st.integers(1, 2)),) + size
    kw = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode)
    if kind == 'max': kw.update(dilation=dilation, return_indices=draw(st.booleans()))
    else:
        kw.update(count_include_pad=draw(st.booleans()))
        if nd == 2 and draw(st.integers(0, 3)) == 0: kw.update(divisor_override=draw(st.integers(1, 5)))
    if nd == 1 or draw(st.booleans()):   # ints for 1-d (and for equal sides)
        for key in ('kernel_size', 'stride', 'padding', 'dilation'):
            v = kw.get(key)
            if isinstance(v, tuple) and len(set(v)) == 1: kw[key] = v[0]
    geometry = [pool_windows(L, k, (stride or kernel)[i], padding[i], dilation[i], ceil_mode)
                for i, (L, k) in enumerate(zip(size, kernel))]
    return f"{kind}_pool{nd}d", shape, kw, geometry


@fuzz(1400)
@given(case=pool_case(), ties=st.booleans(), seed=seeds)
def test_pool(case, ties, seed):
    """max_pool1d/2d (with the indices of the maxima; ties broken as PyTorch does) and avg_pool1d/2d: values and
    gradients, or PyTorch's refusal. Geometries where a window lies entirely in the padding are left out."""
    name, shape, kw, geometry = case
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, shape).astype(np.float64) if ties else rng.standard_normal(shape)
    f = lambda F: (lambda x: getattr(F, name)(x, **kw))
    if torch_raises(f(TF), [a]):
        both_raise(f(MF), f(TF), [a])
        return
    assume(not any(padding_only for _, padding_only in geometry))
    n = math.prod(k for k in (kw['kernel_size'] if isinstance(kw['kernel_size'], tuple) else (kw['kernel_size'],)))
    differential(f(MF), f(TF), [a], seed, n=n)


# ---------------------------------------------------------------- normalization
def norm_input(draw, rng, min_dims=2):
    "An (N, C, ...) array: normal numbers with an offset and a scale, or small integers (constant slices are frequent)."
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=min_dims, max_size=4)))
    if draw(st.booleans()): return rng.integers(-1, 2, shape).astype(np.float64)
    return rng.standard_normal(shape) * draw(st.sampled_from([1.0, 0.01, 30.0])) + draw(st.sampled_from([0.0, 3.0]))


def norm_grad_scale(arrays, eps):
    "The size of the terms of a normalization's gradient: |weight| |x| / sqrt(var + eps), var as small as 0."
    x, *wb = arrays
    w = float(np.abs(wb[0]).max(initial=1.0)) if wb else 1.0
    return max(w, 1.0) * max(float(np.abs(x).max(initial=0.0)), 1.0) / math.sqrt(eps)


def norm_out_scale(arrays, eps, var):
    """The size of a normalization's output terms, for its rounding: x - mean is off by a few units of |x| and is then
    multiplied by |weight| / sqrt(var + eps), so the smallest variance `var` among the normalized groups sets it."""
    x, *wb = arrays
    w = float(np.abs(wb[0]).max(initial=1.0)) if wb else 1.0
    return max(w, 1.0) * max(float(np.abs(x).max(initial=0.0)), 1.0) / math.sqrt(float(np.min(var)) + eps)


@fuzz(700)
@given(data=st.data(), seed=seeds)
def test_batch_norm(data, seed):
    """batch_norm in training (batch statistics; the running buffers updated as PyTorch updates them, or not tracked)
    and in evaluation (the buffers' statistics), with or without weight and bias."""
    rng = np.random.default_rng(seed)
    x = norm_input(data.draw, rng)
    C = x.shape[1]
    training, tracked, affine = data.draw(st.booleans()), data.draw(st.booleans()), data.draw(st.booleans())
    momentum, eps = data.draw(st.sampled_from([0.1, 0.5, 1.0])), data.draw(st.sampled_from([1e-5, 1e-3]))
    rm0, rv0 = rng.standard_normal(C), rng.uniform(0.5, 2.0, C)
    buffers = {}
    def f(F, make):
        def run(x, *wb):
            rm, rv = (make(rm0.copy()), make(rv0.copy())) if tracked else (None, None)
            buffers[F] = (rm, rv)
            return F.batch_norm(x, rm, rv, *wb, training=training, momentum=momentum, eps=eps)
        return run
    arrays = [x] + ([rng.standard_normal(C), rng.standard_normal(C)] if affine else [])
    if torch_raises(f(TF, torch.tensor), arrays):
        both_raise(f(MF, tensor), f(TF, torch.tensor), arrays)
        return
    n = x.size // C
    var = x.var(axis=tuple(i for i in range(x.ndim) if i != 1)) if training or not tracked else rv0
    differential(f(MF, tensor), f(TF, torch.tensor), arrays, seed, n=n, scale=norm_out_scale(arrays, eps, var),
                 grad_scale=norm_grad_scale(arrays, eps))
    if tracked:
        for mine, theirs, what in zip(buffers[MF], buffers[TF], ('running_mean', 'running_var')):
            assert_close(mine, theirs, what, n=n, scale=float(np.abs(x).max()) ** 2)


@fuzz(600)
@given(data=st.data(), seed=seeds)
def test_layer_norm(data, seed):
    "layer_norm over the last one, two or three dims, with or without an elementwise weight and bias."
    rng = np.random.default_rng(seed)
    x = norm_input(data.draw, rng, min_dims=1)
    k = data.draw(st.integers(1, x.ndim))
    shape = x.shape[x.ndim - k:]
    affine, eps = data.draw(st.sampled_from(['none', 'weight', 'both'])), data.draw(st.sampled_from([1e-5, 1e-3]))
    arrays = [x] + [rng.standard_normal(shape) for _ in range({'none': 0, 'weight': 1, 'both': 2}[affine])]
    f = lambda F: (lambda x, *wb: F.layer_norm(x, shape, *wb, eps=eps))
    var = x.var(axis=tuple(range(x.ndim - k, x.ndim)))
    differential(f(MF), f(TF), arrays, seed, n=math.prod(shape), scale=norm_out_scale(arrays, eps, var),
                 grad_scale=norm_grad_scale(arrays, eps))


@fuzz(600)
@given(data=st.data(), seed=seeds)
def test_group_norm(data, seed):
    "group_norm for every number of groups that divides the channels (and one that does not, which both refuse)."
    rng = np.random.default_rng(seed)
    x = norm_input(data.draw, rng)
    C = x.shape[1]
    groups = data.draw(st.sampled_from([g for g in range(1, C + 1) if C % g == 0] + [C + 1]))
    affine, eps = data.draw(st.booleans()), data.draw(st.sampled_from([1e-5, 1e-3]))
    arrays = [x] + ([rng.standard_normal(C), rng.standard_normal(C)] if affine else [])
    f = lambda F: (lambda x, *wb: F.group_norm(x, groups, *wb, eps=eps))
    # PyTorch refuses a batch of one sample whose groups hold one number each (and returns zeros for two such samples);
    # MyTorch returns the zeros for both (reported)
    assume(not (x.shape[0] == 1 and groups == C and x.size == C))
    if torch_raises(f(TF), arrays):
        both_raise(f(MF), f(TF), arrays)
        return
    var = x.reshape(x.shape[0], groups, -1).var(axis=2)
    differential(f(MF), f(TF), arrays, seed, n=x.size // x.shape[0] // groups, scale=norm_out_scale(arrays, eps, var),
                 grad_scale=norm_grad_scale(arrays, eps))


# ---------------------------------------------------------------- the budget
def test_the_shares_add_up_to_the_default_total():
    "MYTORCH_FUZZ_EXAMPLES is a total over the suite: the tests' shares at the default must add up to it."
    assert sum(fs.SHARES.values()) == fs.DEFAULT_TOTAL, (sum(fs.SHARES.values()), fs.DEFAULT_TOTAL)
    assert fs.DEFAULT_TOTAL >= 5000
