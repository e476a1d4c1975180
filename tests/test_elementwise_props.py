"""Property-based tests of the elementwise ops (mytorch.elementwise) against PyTorch, in float64.

Random shapes and broadcastable pairs, under the numpy broadcasting policy: values and gradients
must equal torch's to 1e-10, at random points and exactly at the joins of the piecewise ops.
Under the strict policy, BroadcastError must be raised exactly for the ambiguous alignments,
decided here by a predicate written independently of the engine's.
"""
import math
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")
import mytorch.engine, mytorch.elementwise  # noqa: E401  (the elementwise chapter adds its methods to Tensor)
from mytorch.engine import BroadcastError, get_broadcast_policy, set_broadcast_policy, tensor
from mytorch.elementwise import maximum, minimum, where

FAST = settings(max_examples=40, deadline=None)
TOL = dict(rtol=1e-12, atol=1e-10)


@contextmanager
def broadcast_policy(policy):
    prev = get_broadcast_policy()
    set_broadcast_policy(policy)
    try: yield
    finally: set_broadcast_policy(prev)


# --- value domains: each takes (rng, shape, grid) and returns float64 values where the op is defined;
# with grid=True the values come from a few round numbers, so that joins (relu at 0, clamp at its
# bounds) and ties (maximum of equal values) are hit exactly ---
def anywhere(rng, shape, grid):
    return rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], shape) if grid else rng.uniform(-3, 3, shape)

def positive(rng, shape, grid): return rng.choice([0.5, 1.0, 2.0], shape) if grid else rng.uniform(0.2, 3.0, shape)
def above_minus_one(rng, shape, grid): return rng.uniform(-0.9, 3.0, shape)
def nonzero(rng, shape, grid): return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 3.0, shape)
def wide(rng, shape, grid): return rng.uniform(-60, 60, shape)

# (name, op, domain of each input): every op is written so that it runs unchanged on both libraries
BINARY = [
    ('add', lambda a, b: a + b, anywhere, anywhere),
    ('add alpha', lambda a, b: a.add(b, alpha=-1.5), anywhere, anywhere),
    ('sub', lambda a, b: a - b, anywhere, anywhere),
    ('mul', lambda a, b: a * b, anywhere, anywhere),
    ('div', lambda a, b: a / b, anywhere, nonzero),
    ('pow', lambda a, b: a ** b, positive, anywhere),
    ('maximum', lambda a, b: a.maximum(b), anywhere, anywhere),
    ('minimum', lambda a, b: a.minimum(b), anywhere, anywhere),
    ('where', lambda a, b: a.where(a > 0, b), anywhere, anywhere),
]

UNARY = [
    ('neg', lambda x: -x, anywhere),
    ('rsub', lambda x: 1.5 - x, anywhere),
    ('rtruediv', lambda x: 2.0 / x, nonzero),
    ('pow 3', lambda x: x ** 3, anywhere),
    ('pow 2.5', lambda x: x.pow(2.5), positive),
    ('pow -0.5', lambda x: x ** -0.5, positive),
    ('pow 0', lambda x: x ** 0, anywhere),
    ('rpow', lambda x: 2.0 ** x, anywhere),
    ('exp', lambda x: x.exp(), anywhere),
    ('log', lambda x: x.log(), positive),
    ('log1p', lambda x: x.log1p(), above_minus_one),
    ('sqrt', lambda x: x.sqrt(), positive),
    ('rsqrt', lambda x: x.rsqrt(), positive),
    ('abs', lambda x: x.abs(), anywhere),
    ('sign', lambda x: x.sign(), anywhere),
    ('sin', lambda x: x.sin(), anywhere),
    ('cos', lambda x: x.cos(), anywhere),
    ('tanh', lambda x: x.tanh(), wide),
    ('sigmoid', lambda x: x.sigmoid(), wide),
    ('relu', lambda x: x.relu(), anywhere),
    ('clamp', lambda x: x.clamp(-0.5, 0.5), anywhere),
    ('clamp min', lambda x: x.clamp(min=0.0), anywhere),
    ('clamp max', lambda x: x.clamp(max=-0.5), anywhere),
    ('reciprocal', lambda x: x.reciprocal(), nonzero),
    ('square', lambda x: x.square(), anywhere),
]

COMPARISONS = [('==', lambda a, b: a == b), ('!=', lambda a, b: a != b), ('<', lambda a, b: a < b),
               ('<=', lambda a, b: a <= b), ('>', lambda a, b: a > b), ('>=', lambda a, b: a >= b)]


def run(lib, f, xs, v):
    "f's value and the gradients of <v, f(xs)>, as NumPy arrays, in 'mytorch' or 'torch'"
    make = tensor if lib == 'mytorch' else torch.tensor
    ts = [make(x, requires_grad=True) for x in xs]
    out = f(*ts)
    out.backward(make(v))
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


def assert_same(xs, f, rng):
    ours_shape = None
    with broadcast_policy('numpy'):
        probe = f(*[tensor(x) for x in xs])
        ours_shape = probe.shape
        v = rng.standard_normal(ours_shape)
        ours = run('mytorch', f, xs, v)
    theirs = run('torch', f, xs, v)
    assert ours_shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], **TOL)
    for g, tg in zip(ours[1], theirs[1]): np.testing.assert_allclose(g, tg, **TOL)


shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4)
seeds = st.integers(0, 2**32 - 1)


@pytest.mark.parametrize('name,f,dom_a,dom_b', BINARY, ids=[c[0] for c in BINARY])
@FAST
@given(shapes=pairs, seed=seeds, grid=st.booleans())
def test_binary_matches_torch(name, f, dom_a, dom_b, shapes, seed, grid):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    assert_same([dom_a(rng, sa, grid), dom_b(rng, sb, grid)], f, rng)


@pytest.mark.parametrize('name,f,dom', UNARY, ids=[c[0] for c in UNARY])
@FAST
@given(shape=shapes, seed=seeds, grid=st.booleans())
def test_unary_matches_torch(name, f, dom, shape, seed, grid):
    rng = np.random.default_rng(seed)
    assert_same([dom(rng, shape, grid)], f, rng)


@pytest.mark.parametrize('name,f', COMPARISONS, ids=[c[0] for c in COMPARISONS])
@FAST
@given(shapes=pairs, seed=seeds, grid=st.booleans())
def test_comparisons_match_torch(name, f, shapes, seed, grid):
    rng = np.random.default_rng(seed)
    xa, xb = (anywhere(rng, s, grid) for s in shapes.input_shapes)
    with broadcast_policy('numpy'):
        ours = f(tensor(xa), tensor(xb))
    theirs = f(torch.tensor(xa), torch.tensor(xb))
    assert ours.dtype == np.bool_ and not ours.requires_grad
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# --- strict broadcasting: the independent predicate ---
def numpy_broadcastable(sa, sb):
    "NumPy's rule: aligned at the trailing axes, each pair of lengths equal or one of them 1"
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(sa), reversed(sb)))

def ambiguous(sa, sb):
    "ranks differ, the shorter operand has more than one element, and its shape fits the longer one at > 1 position"
    if len(sa) == len(sb): return False
    small, big = (sa, sb) if len(sa) < len(sb) else (sb, sa)
    if math.prod(small) <= 1: return False
    fits = sum(all(s == w or s == 1 or w == 1 for s, w in zip(small, big[p:p + len(small)]))
               for p in range(len(big) - len(small) + 1))
    return fits > 1

@st.composite
def shape_pairs(draw):
    "pairs that broadcast, pairs that do not, and windows cut from a shape (where ambiguity lives)"
    kind = draw(st.sampled_from(['broadcastable', 'independent', 'window']))
    if kind == 'broadcastable': return tuple(draw(pairs).input_shapes)
    small_sides = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=3)
    if kind == 'independent': return draw(small_sides), draw(small_sides)
    big = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3))
    start = draw(st.integers(0, len(big) - 1))
    stop = draw(st.integers(start, len(big)))
    small = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else n for n in big[start:stop])
    return (small, big) if draw(st.booleans()) else (big, small)

STRICT_OPS = [lambda a, b: a - b, lambda a, b: a / b, lambda a, b: a ** b, lambda a, b: maximum(a, b),
              lambda a, b: minimum(a, b), lambda a, b: a < b, lambda a, b: where(a > 0, a, b)]

def raises_broadcast_error(f, sa, sb):
    try: out = f(tensor(np.ones(sa)), tensor(np.ones(sb)))
    except BroadcastError: return True
    assert out.shape == np.broadcast_shapes(sa, sb)
    return False

@settings(max_examples=150, deadline=None)
@given(pair=shape_pairs(), op=st.sampled_from(STRICT_OPS))
def test_strict_policy_raises_exactly_for_ambiguous_pairs(pair, op):
    sa, sb = pair
    expected = not numpy_broadcastable(sa, sb) or ambiguous(sa, sb)
    with broadcast_policy('strict'):
        assert raises_broadcast_error(op, sa, sb) == expected, (sa, sb)
    with broadcast_policy('numpy'):
        assert raises_broadcast_error(op, sa, sb) == (not numpy_broadcastable(sa, sb)), (sa, sb)


def test_the_predicate_on_known_cases():
    "the predicate itself, on the cases the book discusses"
    assert ambiguous((3, 3), (3,)) and ambiguous((3,), (3, 3))
    assert not ambiguous((2, 3), (3,))          # fits only at the end
    assert not ambiguous((3, 3), (1,)) and not ambiguous((3, 3), ())
    assert ambiguous((2, 2, 2), (2, 2)) and not ambiguous((2, 2), (2, 2))
    assert not numpy_broadcastable((2, 3), (2,)) and numpy_broadcastable((4, 1, 3), (2, 1))
