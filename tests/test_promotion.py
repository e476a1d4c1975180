"""PyTorch's type promotion, checked exhaustively against PyTorch.

Every pair of the nine dtypes (bool, uint8, int8, int16, int32, int64, float16, float32, float64), as tensors with
dimensions and as 0-d tensors, and every Python number kind (bool, int, float) on either side, through the binary
arithmetic operators and their functional forms, true division, powers, comparisons, maximum/minimum, where and
the in-place forms: the same call in MyTorch and in PyTorch must give the same dtype and values, or both refuse.
Each case runs with the default dtype float32 and float64 (set in both libraries). Division by a zero (a False)
is computed under the 'nan' math policy, so that it gives PyTorch's inf and nan instead of a DomainError.
"""
import itertools
import operator

import numpy as np
import pytest
import torch

import mytorch
from mytorch.engine import tensor, set_default_dtype, get_default_dtype
from mytorch.elementwise import set_math_policy

DTYPES = ['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64']
NUMBERS = [True, 2, 1.5]
SHAPE = (4,)


def values(dtype:str, shape) -> np.ndarray:
    "Small values every op accepts: 1..3 for numbers (so no integer goes negative to a power), mixed for bools."
    if dtype == 'bool': return np.resize(np.array([True, False, True, True]), shape)
    return np.resize(np.array([1, 3, 2, 3]), shape).astype(dtype)


BINARY = {
    'add': operator.add, 'sub': operator.sub, 'mul': operator.mul, 'truediv': operator.truediv, 'pow': operator.pow,
    'eq': operator.eq, 'ne': operator.ne, 'lt': operator.lt, 'le': operator.le, 'gt': operator.gt, 'ge': operator.ge,
    'add()': lambda a, b: a.add(b), 'sub()': lambda a, b: a.sub(b), 'mul()': lambda a, b: a.mul(b),
    'div()': lambda a, b: a.div(b), 'pow()': lambda a, b: a.pow(b),
    'maximum': lambda a, b: a.maximum(b), 'minimum': lambda a, b: a.minimum(b),
    'where': lambda a, b: a.where(a > 1, b),
}
INPLACE = ['add_', 'sub_', 'mul_', 'div_', 'pow_']


def run(f):
    "f() as (dtype name, values as an array), or ('raises', exception type name)."
    try: r = f()
    except Exception as e: return ('raises', type(e).__name__)
    if isinstance(r, torch.Tensor): return str(r.dtype).removeprefix('torch.'), r.detach().numpy()
    return str(r.dtype), r.detach().numpy()


def same(mine, theirs) -> bool:
    "Both refused, or the same dtype and the same values (pow within a few units of rounding of the dtype)."
    if mine[0] == 'raises' or theirs[0] == 'raises': return mine[0] == theirs[0] == 'raises'
    if mine[0] != theirs[0] or mine[1].shape != theirs[1].shape: return False
    a, b = mine[1], theirs[1]
    if a.dtype.kind != 'f': return np.array_equal(a, b)
    eps = float(np.finfo(a.dtype).eps)
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid='ignore'):   # inf - inf where both are inf: equal, caught by a == b
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= 4 * eps * np.abs(b))))


def operand(lib, kind, shape):
    "A tensor of dtype `kind` (shape `shape`) in `lib`, or the Python number `kind` itself."
    if not isinstance(kind, str): return kind
    v = values(kind, shape)
    return torch.tensor(v) if lib == 'torch' else tensor(v)


def cases():
    "(left, right, shapes): every dtype pair at shapes (4,)/(4,), (4,)/(), ()/(4,), ()/(), and every number on each side."
    for a, b in itertools.product(DTYPES, DTYPES):
        for shapes in ((SHAPE, SHAPE), (SHAPE, ()), ((), SHAPE), ((), ())):
            yield a, b, shapes
    for a, n in itertools.product(DTYPES, NUMBERS):
        for shape in (SHAPE, ()):
            yield a, n, (shape, None)
            yield n, a, (None, shape)


@pytest.fixture(params=['float32', 'float64'])
def default_dtype(request):
    "The default dtype, set in both libraries for the test and restored after it."
    mine, theirs = get_default_dtype(), torch.get_default_dtype()
    set_default_dtype(np.dtype(request.param))
    torch.set_default_dtype(getattr(torch, request.param))
    with set_math_policy('nan'):
        yield request.param
    set_default_dtype(mine)
    torch.set_default_dtype(theirs)


def mismatches(f, pairs):
    "The cases where f (applied to operands in either library) disagrees with PyTorch."
    bad = []
    for a, b, (sa, sb) in pairs:
        if not isinstance(a, str) and not isinstance(b, str): continue
        mine = run(lambda: f(operand('mine', a, sa), operand('mine', b, sb)))
        theirs = run(lambda: f(operand('torch', a, sa), operand('torch', b, sb)))
        if not same(mine, theirs):
            bad.append(f"{a!r}{list(sa) if sa is not None else ''} with {b!r}{list(sb) if sb is not None else ''}: "
                       f"mytorch {mine[0]} {mine[1]}, torch {theirs[0]} {theirs[1]}")
    return bad


@pytest.mark.parametrize('op', list(BINARY))
def test_binary(op, default_dtype):
    "Dtype and values of `op` for every pair of operands, or a refusal where PyTorch refuses."
    f = BINARY[op]
    pairs = [c for c in cases() if isinstance(c[0], str) or op not in ('maximum', 'minimum', 'where')]
    bad = mismatches(f, pairs)
    assert not bad, f"{len(bad)} of {len(pairs)} cases differ from PyTorch:\n" + "\n".join(bad[:40])


@pytest.mark.parametrize('op', INPLACE)
def test_inplace(op, default_dtype):
    "x.op_(y) keeps x's dtype when PyTorch's result type can be cast to it, and refuses (as PyTorch) when it cannot."
    pairs = [c for c in cases() if isinstance(c[0], str) and c[2][0] == SHAPE]
    bad = mismatches(lambda a, b: getattr(a, op)(b), pairs)
    assert not bad, f"{len(bad)} of {len(pairs)} cases differ from PyTorch:\n" + "\n".join(bad[:40])


def test_where_with_two_numbers(default_dtype):
    "where(c, number, number): the numbers' promoted dtype (bool, int64 or the default float dtype)."
    for x, y in itertools.product(NUMBERS, NUMBERS):
        mine = run(lambda: mytorch.where(tensor([True, False]), x, y))
        theirs = run(lambda: torch.where(torch.tensor([True, False]), x, y))
        assert same(mine, theirs), (x, y, mine, theirs)


def test_result_type_promote_types_can_cast(default_dtype):
    "The public functions agree with torch.result_type, torch.promote_types and torch.can_cast on every pair."
    for a, b, (sa, sb) in cases():
        mine = mytorch.result_type(operand('mine', a, sa), operand('mine', b, sb))
        theirs = torch.result_type(operand('torch', a, sa), operand('torch', b, sb))
        assert mine == np.dtype(str(theirs).removeprefix('torch.')), (a, sa, b, sb, mine, theirs)
    for a, b in itertools.product(DTYPES, DTYPES):
        ta, tb = getattr(torch, a), getattr(torch, b)
        assert mytorch.promote_types(np.dtype(a), np.dtype(b)) == np.dtype(str(torch.promote_types(ta, tb))[6:]), (a, b)
        assert mytorch.can_cast(np.dtype(a), np.dtype(b)) == torch.can_cast(ta, tb), (a, b)


def test_gradients_keep_their_inputs_dtypes():
    "Promotion sets the result's dtype, never a gradient's: each leaf's gradient has its own dtype, and PyTorch's values."
    def graph(lib, f16, f64):
        w = lib.tensor([1.5, -2.0], dtype=f16, requires_grad=True)   # float16 with float32: no conversion needed
        x = lib.tensor([0.25, 4.0], requires_grad=True)
        s = lib.tensor(3.0, dtype=f64, requires_grad=True)           # a 0-d float64, converted down to float32
        y = w * x * s
        y.sum().backward()
        return [(str(t.dtype).removeprefix('torch.'), np.asarray(t.tolist())) for t in (y, w.grad, x.grad, s.grad)]
    mine, theirs = graph(mytorch, mytorch.float16, mytorch.float64), graph(torch, torch.float16, torch.float64)
    assert [d for d, _ in mine] == [d for d, _ in theirs] == ['float32', 'float16', 'float32', 'float64']
    for (_, a), (_, b) in zip(mine, theirs): assert np.array_equal(a, b), (a, b)


def test_inplace_refusal_names_both_dtypes():
    "The in-place refusal says which result type could not be written into which tensor, as PyTorch's does."
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        tensor([1, 2]).div_(2)
    with pytest.raises(RuntimeError, match="result type int64 can't be cast to the desired output type bool"):
        tensor([True]).add_(1)
    t = tensor(np.array([1, 2], dtype=np.uint8))
    t.add_(tensor([1, 1]))   # an int64 result written into uint8: allowed, as in PyTorch (NumPy's same_kind refuses)
    assert t.dtype == np.uint8 and t.tolist() == [2, 3]
