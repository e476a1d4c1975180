"""No NumPy RuntimeWarning reaches a MyTorch user, and the math policy decides what the edge cases give.

NumPy reports the IEEE 754 exceptions (invalid, divide-by-zero, overflow) as a RuntimeWarning that
names a NumPy function the reader never called; PyTorch reports nothing. Each case below runs
forward and backward (plain, and recorded with create_graph=True) under both math policies and
records every warning:

- no RuntimeWarning may appear, under either policy, in either pass;
- under set_math_policy('nan') (PyTorch's behaviour) the values and gradients are PyTorch's: the
  same nan and inf at the same places, the same dtype and shape, finite entries within a tolerance
  derived from the dtype's epsilon;
- under 'raise' (the default) a case is either well defined in IEEE arithmetic (an infinity that
  came from elsewhere, an overflow, an empty sum) and gives the same as under 'nan', or it is
  undefined math made here (0/0 of an empty mean, a variance with no degrees of freedom, a
  division by zero) and raises DomainError with the values, the fix and the way to PyTorch's
  behaviour.
"""
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import mytorch as mt
import mytorch.nn.functional as MF
from mytorch.scalar import DomainError

INF, NAN = math.inf, math.nan
DOF_WARNING = "degrees of freedom is <= 0. Correction should be strictly less than the reduction factor"


class Lib:
    "One of the two libraries, so that each case is written once: .t(values) makes a leaf that requires grad."
    def __init__(self, mod, F): self.mod, self.F = mod, F
    def t(self, values, dtype='float64'):
        return self.mod.tensor(np.asarray(values, dtype=dtype), dtype=getattr(self.mod, dtype), requires_grad=True)


MT, TORCH = Lib(mt, MF), Lib(torch, TF)


class Case:
    def __init__(self, build, refuses=None, grads=True, user_warning=None):
        self.build = build                # build(lib) -> (output, [inputs])
        self.refuses = refuses            # None: well defined; else a phrase of the DomainError under 'raise'
        self.grads = grads                # compare the gradients with PyTorch's (False where PyTorch's own paths disagree)
        self.user_warning = user_warning  # the UserWarning PyTorch gives (and MyTorch under 'nan'), or None


def unary(f, values, dtype='float64'):
    def build(L):
        x = L.t(values, dtype)
        return f(L, x), [x]
    return build


def binary(f, a, b):
    def build(L):
        x, y = L.t(a), L.t(b)
        return f(L, x, y), [x, y]
    return build


CASES = {
    # elementwise (chapter 12): the infinity came from elsewhere, or the result overflowed; both quiet under either policy
    'inf - inf':                binary(lambda L, a, b: a - b, [INF, 1.0, -INF], [INF, 0.0, -INF]),
    'exp overflow, float32':    unary(lambda L, x: x.exp(), [100.0, 1.0, -200.0], 'float32'),
    'exp overflow, float64':    unary(lambda L, x: x.exp(), [1000.0, 1.0]),
    'pow overflow':             unary(lambda L, x: x ** 2, [1e200, 2.0]),
    'x ** 0.5 at -inf':         Case(unary(lambda L, x: x ** 0.5, [-INF, 4.0]), refuses="non-integer power"),
    'x ** 0.5 at -0.0':         Case(unary(lambda L, x: x ** 0.5, [-0.0, 4.0]), refuses="infinite at x = 0"),
    'x ** -0.5 at -0.0, -inf':  Case(unary(lambda L, x: x ** -0.5, [-0.0, -INF, 4.0]), refuses="a negative power of 0"),
    'sin of inf':               unary(lambda L, x: x.sin(), [INF, -INF, 1.0]),
    'division by zero':         Case(binary(lambda L, a, b: a / b, [1.0, 0.0, -1.0, 2.0], [0.0, 0.0, 0.0, 4.0]),
                                     refuses="the divisor must be nonzero"),
    'division by zero, 0-d':    Case(binary(lambda L, a, b: a / b, 1.5, 0.0), refuses="the divisor must be nonzero"),
    'division by zero, broadcast': Case(binary(lambda L, a, b: a / b, [[1.0, 0.0, INF], [2.0, -1.0, 0.0]], [0.0, 0.0, 4.0]),
                                        refuses="the divisor must be nonzero"),
    'division by a subnormal':  binary(lambda L, a, b: a / b, [0.0, 1.0, -3.0], [1e-310, 1e-310, 2.0]),
    '0 * inf':                  binary(lambda L, a, b: a * b, [0.0, 2.0], [INF, INF]),
    # softmax and friends (chapter 16)
    'softmax([inf, 1])':        unary(lambda L, x: L.F.softmax(x, 0), [INF, 1.0]),
    'softmax([-inf, -inf])':    unary(lambda L, x: L.F.softmax(x, 0), [-INF, -INF]),
    'softmax, rows with inf':   unary(lambda L, x: L.F.softmax(x, 1), [[INF, 1.0, 2.0], [1.0, 2.0, 3.0]]),
    'log_softmax([inf, 1])':    unary(lambda L, x: L.F.log_softmax(x, 0), [INF, 1.0]),
    'log_softmax([-inf, 1])':   unary(lambda L, x: L.F.log_softmax(x, 0), [-INF, 1.0]),
    'log_softmax([-inf, -inf])': unary(lambda L, x: L.F.log_softmax(x, 0), [-INF, -INF]),
    'log_softmax, float32 rows': unary(lambda L, x: L.F.log_softmax(x, -1), [[INF, 0.0], [-INF, 0.0], [1.0, 2.0]], 'float32'),
    # normalization (chapter 27)
    'layer_norm, a row with inf': unary(lambda L, x: L.F.layer_norm(x, (3,)), [[INF, 1.0, 2.0], [1.0, 2.0, 3.0]]),
    'layer_norm, inf and -inf, affine': lambda L: (lambda x, w, b: (L.F.layer_norm(x, (3,), w, b), [x, w, b]))(
        L.t([[-INF, 1.0, INF], [1.0, 2.0, 4.0]]), L.t([1.0, 2.0, 3.0]), L.t([0.0, 1.0, 0.0])),
    'batch_norm, a channel with inf': unary(lambda L, x: L.F.batch_norm(x, None, None, training=True),
                                            [[INF, 1.0], [1.0, 2.0], [3.0, 5.0]]),
    'group_norm, a group with inf': unary(lambda L, x: L.F.group_norm(x, 2), [[[INF, 1.0], [1.0, 2.0], [3.0, 5.0], [1.0, 0.0]]]),
    # reductions (chapter 13): empty inputs
    'sum of empty':             unary(lambda L, x: x.sum(), []),
    'prod of empty':            unary(lambda L, x: x.prod(), []),
    'logsumexp of empty':       unary(lambda L, x: L.mod.logsumexp(x, 0), np.zeros((0, 2))),
    'norm of empty':            unary(lambda L, x: x.norm(), []),
    'mean of empty':            Case(unary(lambda L, x: x.mean(), []), refuses="combines zero elements"),
    'mean over an empty dim':   Case(unary(lambda L, x: x.mean(0), np.zeros((0, 3))), refuses="combines zero elements"),
    # reductions: no degrees of freedom (n <= correction)
    'var of empty':             Case(unary(lambda L, x: x.var(), []), refuses="n - correction", user_warning='var'),
    'std of empty':             Case(unary(lambda L, x: x.std(), []), refuses="n - correction", user_warning='std'),
    'var of one number':        Case(unary(lambda L, x: x.var(), [1.5]), refuses="n - correction", user_warning='var'),
    'std of one number':        Case(unary(lambda L, x: x.std(), [1.5]), refuses="n - correction", user_warning='std'),
    'var of one number, float32': Case(unary(lambda L, x: x.var(), [1.5], 'float32'), refuses="n - correction",
                                       user_warning='var'),
    'var, n == correction':     Case(unary(lambda L, x: x.var(0, correction=2), [1.0, 2.0]), refuses="n - correction",
                                     user_warning='var'),
    'std, n == correction':     Case(unary(lambda L, x: x.std(0, correction=2), [1.0, 2.0]), refuses="n - correction",
                                     user_warning='std'),
    'var, equal numbers, n == correction': Case(unary(lambda L, x: x.var(correction=2), [1.0, 1.0]),
                                                refuses="n - correction", user_warning='var'),
    # PyTorch's gradient for n < correction is finite with dim= and +inf without: its two paths disagree
    'var, n < correction':      Case(unary(lambda L, x: x.var(0, correction=3), [1.0, 2.0]), refuses="n - correction",
                                     grads=False, user_warning='var'),
    'var over a size-1 dim':    Case(unary(lambda L, x: x.var(1), np.ones((2, 1))), refuses="n - correction", user_warning='var'),
    'std over a size-1 dim, keepdim': Case(unary(lambda L, x: x.std(1, keepdim=True), np.ones((2, 1))),
                                           refuses="n - correction", user_warning='std'),
    # reductions: infinities that came from elsewhere
    'sum([inf, -inf])':         unary(lambda L, x: x.sum(), [INF, -INF]),
    'sum overflow, float32':    unary(lambda L, x: x.sum(), [3e38, 3e38], 'float32'),
    'mean([inf, -inf])':        unary(lambda L, x: x.mean(), [INF, -INF, 1.0]),
    'var([inf, 1])':            unary(lambda L, x: x.var(), [INF, 1.0, 2.0]),
    'std([inf, 1]) per row':    unary(lambda L, x: x.std(1), [[INF, 1.0], [1.0, 3.0]]),
    'logsumexp([inf, 1])':      unary(lambda L, x: L.mod.logsumexp(x, 0), [INF, 1.0]),
    'logsumexp([-inf, -inf])':  unary(lambda L, x: L.mod.logsumexp(x, 0), [-INF, -INF]),
    # activations (chapter 23)
    'gelu at +-inf':            unary(lambda L, x: L.F.gelu(x), [INF, -INF, 1.0]),
    'gelu tanh at +-inf':       unary(lambda L, x: L.F.gelu(x, approximate='tanh'), [INF, -INF, 1.0]),
}
CASES = {k: v if isinstance(v, Case) else Case(v) for k, v in CASES.items()}

def run(L, case, create_graph):
    "(output, gradients) of the case in library L, forward and backward with an upstream gradient of ones."
    out, inputs = case.build(L)
    ones = L.mod.tensor(np.ones(tuple(out.shape)), dtype=out.dtype)
    grads = (L.mod.autograd.grad(out, inputs, ones, create_graph=create_graph, allow_unused=True) if L is TORCH
             else mt.autograd.grad(out, inputs, ones, create_graph=create_graph, allow_unused=True))
    return out, list(grads)


def as_array(t):
    return None if t is None else np.asarray(t.detach().numpy())


def assert_same(ours, theirs, what):
    "Same shape and dtype, nan and +-inf at the same places, finite entries within a tolerance from the dtype's epsilon."
    a, b = as_array(ours), as_array(theirs)
    if b is None or a is None:
        assert a is None or not a.size or not np.any(a), f"{what}: torch gives no gradient, mytorch {a}"
        return
    assert a.shape == b.shape, f"{what}: shape {a.shape} != torch's {b.shape}"
    assert str(a.dtype) == str(b.dtype), f"{what}: dtype {a.dtype} != torch's {b.dtype}"
    assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: nan at other places: {a} vs torch {b}"
    assert np.array_equal(np.isposinf(a), np.isposinf(b)) and np.array_equal(np.isneginf(a), np.isneginf(b)), \
        f"{what}: inf at other places: {a} vs torch {b}"
    finite = np.isfinite(b)
    if finite.any():
        eps = np.finfo(b.dtype).eps   # a few roundings per entry: a handful of ops on numbers of size ~1
        scale = max(1.0, float(np.abs(b[finite]).max()))
        np.testing.assert_allclose(a[finite], b[finite], rtol=64 * eps, atol=64 * eps * scale, err_msg=what)


def _params():
    for name in CASES:
        for policy in ('raise', 'nan'):
            for create_graph in (False, True):
                yield pytest.param(name, policy, create_graph,
                                   id=f"{name}-{policy}-{'create_graph' if create_graph else 'backward'}")


@pytest.mark.parametrize('name, policy, create_graph', list(_params()))
def test_no_runtime_warning_and_pytorch_values(name, policy, create_graph):
    case = CASES[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with mt.set_math_policy(policy):
            if policy == 'raise' and case.refuses:
                with pytest.raises(DomainError, match=case.refuses) as refusal: run(MT, case, create_graph)
                assert "Fix:" in str(refusal.value) and "set_math_policy('nan')" in str(refusal.value)
            else:
                ours = run(MT, case, create_graph)
    numpy_warnings = [f"{w.category.__name__} at {w.filename}:{w.lineno}: {w.message}" for w in caught
                      if issubclass(w.category, RuntimeWarning)]
    assert not numpy_warnings, "\n".join(numpy_warnings)
    others = [str(w.message) for w in caught]
    if policy == 'raise' and case.refuses: 
        assert not others, others
        return
    expected = [f"{case.user_warning}(): {DOF_WARNING}"] if case.user_warning and policy == 'nan' else []
    assert [m[:len(e)] for m, e in zip(others, expected)] == expected and len(others) == len(expected), others
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)   # PyTorch's own degrees-of-freedom warning
        theirs = run(TORCH, case, create_graph)
    assert_same(ours[0], theirs[0], f"{name}: value")
    if case.grads:
        for i, (g, h) in enumerate(zip(ours[1], theirs[1])): assert_same(g, h, f"{name}: gradient of input {i}")


NAN_INPUT = [NAN, -1.0, 0.0, 0.5, 2.0, 7.0]
AT_NAN = {
    'relu':        lambda L, x: L.F.relu(x),
    'relu method': lambda L, x: x.relu(),
    'relu6':       lambda L, x: L.F.relu6(x),
    'hardtanh':    lambda L, x: L.F.hardtanh(x),
    'threshold':   lambda L, x: L.F.threshold(x, 0.5, -3.0),
    'leaky_relu':  lambda L, x: L.F.leaky_relu(x, 0.1),
    'clamp':       lambda L, x: x.clamp(-0.5, 0.5),
    'clamp min':   lambda L, x: x.clamp(min=0.0),
    'elu':         lambda L, x: L.F.elu(x),
    'selu':        lambda L, x: L.F.selu(x),
    'celu':        lambda L, x: L.F.celu(x, 2.0),
    'abs':         lambda L, x: x.abs(),
    'sign':        lambda L, x: x.sign(),
    'maximum':     lambda L, x: x.maximum(L.t(np.zeros(len(NAN_INPUT)))),
}


@pytest.mark.parametrize('create_graph', [False, True], ids=['backward', 'create_graph'])
@pytest.mark.parametrize('name', AT_NAN)
def test_values_and_gradients_at_nan_follow_pytorch(name, create_graph):
    "A nan is no join: each op gives PyTorch's value and gradient there (relu passes the gradient, clamp stops it)."
    case = Case(unary(AT_NAN[name], NAN_INPUT))
    with warnings.catch_warnings():
        warnings.simplefilter('error', RuntimeWarning)
        ours = run(MT, case, create_graph)
    theirs = run(TORCH, case, create_graph)
    assert_same(ours[0], theirs[0], f"{name}: value")
    assert_same(ours[1][0], theirs[1][0], f"{name}: gradient")


def test_the_refusals_name_the_values_and_the_fix():
    with pytest.raises(DomainError) as e: mt.tensor([2.5]).var()
    msg = str(e.value)
    assert "var(): each output combines 1 element(s) with correction=1" in msg and "n - correction = 0" in msg
    assert "correction=0" in msg and "set_math_policy('nan')" in msg
    with pytest.raises(DomainError) as e: mt.tensor(np.zeros((0, 3))).mean(0)
    assert "shape (0, 3)" in str(e.value) and "empty batch" in str(e.value)


def test_the_dof_warning_points_at_the_callers_line():
    with mt.set_math_policy('nan'), pytest.warns(UserWarning, match=DOF_WARNING) as record:
        mt.tensor([2.5]).std()
    assert record[0].filename == __file__


def test_numpy_error_state_is_left_alone():
    "The quiet computations set NumPy's error state for their own call only: nothing global changes."
    before = np.geterr()
    for name, case in CASES.items():
        with warnings.catch_warnings(), mt.set_math_policy('nan'):
            warnings.simplefilter('ignore', UserWarning)
            run(MT, case, False)
        assert np.geterr() == before, name
    with warnings.catch_warnings():
        warnings.simplefilter('error', RuntimeWarning)
        with pytest.raises(RuntimeWarning): np.subtract(np.array([np.inf]), np.array([np.inf]))
