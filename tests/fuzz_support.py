"""The machinery of the differential fuzz suite (tests/test_fuzz.py), documented in nbs/90_differential_testing.ipynb.

Each test draws random inputs with hypothesis, runs the same call in MyTorch and in PyTorch (float64
unless a test is about dtypes), and compares the shape, dtype and values of every output, then the
gradient of <v, output> for a random upstream gradient v with respect to every input. Where PyTorch
refuses, MyTorch must refuse too.

Budget: `MYTORCH_FUZZ_EXAMPLES` is the number of examples of the whole suite (default DEFAULT_TOTAL).
Each test declares its share at the default total with `@fuzz(n)` (n examples for each of its
parametrized cases); a different total scales every share by the same factor, at least 1 example each.

Tolerance, elementwise: |mine - theirs| <= RTOL * |theirs| + ATOL_ULPS * eps * sqrt(n) * scale, where
n is the number of terms combined into one number and scale is the magnitude of those terms (by
default the largest |value| of PyTorch's result and of the operands). The chapter explains why.
"""
import functools
import math
import os
from collections import Counter
from contextlib import contextmanager

import numpy as np
import torch
from hypothesis import HealthCheck, settings

import mytorch.engine, mytorch.elementwise, mytorch.reductions, mytorch.shape, mytorch.indexing, mytorch.linalg  # noqa: E401
from mytorch.engine import Tensor, get_broadcast_policy, grad, set_broadcast_policy, tensor

EPS = float(np.finfo(np.float64).eps)   # 2.2e-16: one unit of rounding in float64
RTOL = 1e-10                            # about 4.5e5 units of rounding: room for each library's libm and ordering
ATOL_ULPS = 64                          # 64 times the random-walk size of a sum of n terms (not its worst case)
DEFAULT_TOTAL = 20000                   # examples per `make test`; the shares of the tests add up to this
TOTAL = int(os.environ.get('MYTORCH_FUZZ_EXAMPLES', DEFAULT_TOTAL))
if TOTAL < 1: raise ValueError(f"MYTORCH_FUZZ_EXAMPLES must be a positive number of examples, got {TOTAL}.")

SHARES = {}     # test name -> examples at the default total (per case times cases)
RAN = Counter()  # test name -> examples that ran to completion in this process
CLOCK = {'seconds': 0.0}   # the suite's own wall time, which test_fuzz's module fixture measures


def fuzz(n:int, cases:int=1):
    "Hypothesis settings for a test with n examples per case at the default total, scaled to MYTORCH_FUZZ_EXAMPLES; counts what ran."
    def decorate(test):
        SHARES[test.__name__] = n * cases
        inner = test.hypothesis.inner_test
        @functools.wraps(inner)
        def counted(*args, **kwargs):
            out = inner(*args, **kwargs)
            RAN[test.__name__] += 1
            return out
        test.hypothesis.inner_test = counted
        return settings(max_examples=max(1, round(n * TOTAL / DEFAULT_TOTAL)), deadline=None, database=None,
                        derandomize=False, print_blob=True,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                               HealthCheck.filter_too_much])(test)
    return decorate


@contextmanager
def broadcast_policy(policy:str):
    prev = get_broadcast_policy()
    set_broadcast_policy(policy)
    try: yield
    finally: set_broadcast_policy(prev)


def dtype_name(d) -> str:
    "'float64', 'int64', 'bool', ... for a NumPy, MyTorch or PyTorch dtype."
    if isinstance(d, torch.dtype): return str(d).removeprefix('torch.')
    return np.dtype(d).name


def as_array(x) -> np.ndarray:
    if isinstance(x, torch.Tensor): return x.detach().numpy(force=True)
    if isinstance(x, Tensor): return x.detach().numpy()
    return np.asarray(x)


def tolerance(theirs:np.ndarray, n:int=1, scale:float=0.0, rtol:float=RTOL, eps:float=EPS) -> np.ndarray:
    "The allowed |mine - theirs| at each element: relative, plus absolute for cancellation among n terms of size `scale`."
    finite = np.abs(theirs[np.isfinite(theirs)])
    scale = max(float(scale), float(finite.max(initial=0.0)))
    return rtol * np.abs(theirs) + ATOL_ULPS * eps * math.sqrt(max(n, 1)) * scale


def assert_close(mine, theirs, what:str, n:int=1, scale:float=0.0, exact:bool=False, check_dtype:bool=True,
                 nan_ok=None, rtol:float=None):
    "Shape, dtype and values of `mine` (MyTorch) against `theirs` (PyTorch): nan where PyTorch has nan, the same infinities."
    a, b = as_array(mine), as_array(theirs)
    assert a.shape == b.shape, f"{what}: shape {a.shape}, PyTorch's {b.shape}"
    if check_dtype:
        assert dtype_name(a.dtype) == dtype_name(b.dtype), f"{what}: dtype {a.dtype}, PyTorch's {dtype_name(b.dtype)}"
    if a.dtype.kind not in 'fc' or b.dtype.kind not in 'fc':
        assert np.array_equal(a, b), f"{what}: {a} differs from PyTorch's {b}"
        return
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    eps = float(np.finfo(b.dtype).eps)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    excused = nan_b & ~nan_a & (False if nan_ok is None else np.broadcast_to(nan_ok, b.shape))
    assert not (nan_a & ~nan_b).any() and not (nan_b & ~nan_a & ~excused).any(), \
        f"{what}: nan at {np.argwhere(nan_a).tolist()[:5]}, PyTorch's at {np.argwhere(nan_b).tolist()[:5]}\n mine {a}\n torch {b}"
    inf_a, inf_b = np.isinf(a64), np.isinf(b64)
    assert np.array_equal(inf_a, inf_b) and np.array_equal(a64[inf_a], b64[inf_b]), \
        f"{what}: infinities differ\n mine {a}\n torch {b}"
    fin = np.isfinite(b64) & np.isfinite(a64)
    diff = np.abs(a64[fin] - b64[fin])
    if exact:
        assert not diff.any(), f"{what}: max |mine - torch| = {diff.max()}, expected equal\n mine {a}\n torch {b}"
        return
    if rtol is None: rtol = RTOL if eps == EPS else 16 * eps     # float32/float16: a few units of their rounding
    tol = tolerance(b64[fin], n, scale, rtol=rtol, eps=eps)
    bad = diff > tol
    assert not bad.any(), (f"{what}: max |mine - torch| = {diff.max():.3g} exceeds the tolerance "
                           f"({int(bad.sum())} of {diff.size} elements; n={n}, scale={scale:.3g})\n mine {a}\n torch {b}")


def _outputs(o) -> tuple:
    return tuple(o) if isinstance(o, (tuple, list)) else (o,)


def differential(f, f_torch, arrays, seed:int=0, grad_of=None, n:int=None, scale:float=None, exact:bool=False,
                 grad_n:int=None, check_requires_grad:bool=True, grad_rtol:float=None, grad_scale:float=None):
    """Run `f` on MyTorch tensors made from `arrays` and `f_torch` on PyTorch tensors made from them: outputs (a tensor or
    a tuple) must agree in shape, dtype and value, then the gradients of sum <v_i, output_i> for random v_i with respect to
    the inputs flagged in `grad_of` (default: every floating-point input). Returns the MyTorch outputs.

    n (grad_n): how many terms one output (one gradient element) combines, default the largest input's size;
    scale: their magnitude, default the largest |input|; the gradients' is max|v| * grad_scale (default max(scale, 1))."""
    arrays = [np.asarray(a) for a in arrays]
    if grad_of is None: grad_of = [a.dtype.kind == 'f' for a in arrays]
    xs = [tensor(a, requires_grad=bool(r)) for a, r in zip(arrays, grad_of)]
    ts = [torch.tensor(a, requires_grad=bool(r)) for a, r in zip(arrays, grad_of)]
    outs, touts = _outputs(f(*xs)), _outputs(f_torch(*ts))
    assert len(outs) == len(touts), f"{len(outs)} outputs, PyTorch gives {len(touts)}"
    size = max([a.size for a in arrays] + [1])
    n = size if n is None else n
    if scale is None: scale = max([float(np.abs(a).max(initial=0.0)) for a in arrays if a.dtype.kind == 'f'] + [0.0])
    for i, (o, to) in enumerate(zip(outs, touts)):
        assert_close(o, to, f"output {i}", n=n, scale=scale, exact=exact)
        if check_requires_grad:
            assert o.requires_grad == to.requires_grad, f"output {i}: requires_grad {o.requires_grad}, PyTorch's {to.requires_grad}"
    pairs = [(o, to) for o, to in zip(outs, touts) if to.requires_grad]
    wrt = [(x, t) for x, t, r in zip(xs, ts, grad_of) if r]
    if not pairs or not wrt: return outs
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(to.shape) for _, to in pairs]
    gm = grad([o for o, _ in pairs], [x for x, _ in wrt], [tensor(v) for v in vs], allow_unused=True)
    gt = torch.autograd.grad([to for _, to in pairs], [t for _, t in wrt], [torch.tensor(v) for v in vs],
                             allow_unused=True)
    vmax = max(float(np.abs(v).max(initial=0.0)) for v in vs)
    out_size = max([int(np.prod(to.shape)) for _, to in pairs] + [1])
    for k, ((x, t), g, tg) in enumerate(zip(wrt, gm, gt)):
        g = np.zeros(x.shape) if g is None else g.numpy()
        tg = np.zeros(tuple(t.shape)) if tg is None else tg.numpy()
        assert_close(g, tg, f"gradient of input {k}", n=max(n, out_size) if grad_n is None else grad_n,
                     scale=vmax * max(scale, 1.0) if grad_scale is None else vmax * grad_scale, exact=exact,
                     rtol=grad_rtol)
    return outs


def both_raise(f, f_torch, arrays, expect=None):
    """PyTorch raises on these inputs: MyTorch must raise too (an exception of type `expect`, if given). Returns both
    exceptions."""
    try: f_torch(*[torch.tensor(a) for a in arrays])
    except Exception as e: theirs = e
    else: raise AssertionError("PyTorch accepted the call that this case expects it to refuse")
    try: out = f(*[tensor(a) for a in arrays])
    except Exception as e: mine = e
    else: raise AssertionError(f"PyTorch refuses ({type(theirs).__name__}: {theirs}), MyTorch returned "
                               f"{_outputs(out)[0]!r}")
    if expect is not None: assert isinstance(mine, expect), f"MyTorch raised {type(mine).__name__}: {mine}"
    return mine, theirs


def torch_raises(f_torch, arrays) -> bool:
    "Does PyTorch refuse this call?"
    try: f_torch(*[torch.tensor(a) for a in arrays])
    except Exception: return True
    return False


def summary(failed:int=0) -> str:
    "One line: how many examples ran, in how long, and how many tests failed."
    total = sum(RAN.values())
    return (f"differential fuzz suite: {total} examples against PyTorch {torch.__version__} in "
            f"{CLOCK['seconds']:.1f} s (MYTORCH_FUZZ_EXAMPLES={TOTAL}), {failed} mismatches")
