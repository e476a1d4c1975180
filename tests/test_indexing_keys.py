"""Every key PyTorch accepts, against PyTorch: x[key] and x[key] = v, values, shapes, layout and gradients.

The keys are drawn from PyTorch's whole vocabulary: Python and NumPy integers, 0-d integer and bool tensors, slices
(with tensor bounds now and then), None, one or more `...`, True/False, lists, nested lists, ranges, tuples used as
one index, NumPy arrays (int64, int32, int16, bool, uint8 as a mask), int32/int64 tensors and bool masks over one or
more dimensions, in any mix, as a tuple, a bare item, or a list that PyTorch reads as a tuple. The placement of the
advanced dimensions (kept in place when adjacent, moved first when separated, and what counts as separating: a slice
or None between them does, an int or a `...` of zero width does not) is therefore checked with everything around it.
Where PyTorch refuses, MyTorch must refuse too, with an error of a type PyTorch could raise for the same key.
"""
import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import mytorch.indexing  # noqa: F401  (x[key] and x[key] = v)
from mytorch.engine import int32, int64, tensor
from fuzz_support import differential

EXAMPLES = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)
seeds = st.integers(0, 2**32 - 1)


@pytest.fixture(autouse=True)
def quiet():
    "PyTorch and MyTorch both warn about a list read as a tuple and about uint8 masks; the tests compare results."
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        yield


@st.composite
def recipes(draw, shape):
    "A list of items, each ('kind', data), that index a tensor of `shape` (now and then out of range)."
    items, d, rng = [], 0, np.random.default_rng(draw(seeds))
    adv_shape = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    ellipses = 0
    for _ in range(draw(st.integers(0, 5))):
        kinds = ['none', 'bool', 'bool0d'] + (['ellipsis'] if ellipses < 2 else [])
        if d < len(shape):
            kinds += ['int', 'npint', 'int0d', 'slice', 'slice', 'list', 'nested', 'range', 'tuple', 'np', 'tensor',
                      'mask', 'boollist', 'intbool']
        kind = draw(st.sampled_from(kinds))
        n = shape[d] if d < len(shape) else 0
        oob = draw(st.integers(0, 19)) == 0                    # now and then an index out of range
        if kind in ('int', 'npint', 'int0d'):
            i = (n if draw(st.booleans()) else -n - 1) if oob else draw(st.integers(-n, n - 1)) if n else 0
            items.append((kind, i)); d += 1
        elif kind == 'slice':
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            items.append((kind, slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3]))),
                          draw(st.integers(0, 4)) == 0)); d += 1          # the flag: bounds as 0-d tensors
        elif kind in ('list', 'nested', 'tuple', 'np', 'tensor'):
            sh = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else s for s in adv_shape)
            if kind in ('list', 'tuple'): sh = sh[-1:] or (2,)      # one dimension: a flat list or tuple
            if kind == 'nested': sh = (sh + (2, 2))[:2]            # two dimensions: a list of lists
            hi = n + 1 if oob else n
            arr = rng.integers(-n, hi, sh) if hi > -n else np.zeros(sh, np.int64)
            dtype = draw(st.sampled_from(['int64', 'int32', 'int16'] if kind == 'np' else ['int64', 'int32']))
            items.append((kind, arr.astype(dtype))); d += 1
        elif kind == 'range':
            start, step = draw(st.integers(-n, max(n - 1, -n))), draw(st.integers(1, 2))
            items.append((kind, range(start, min(n, start + 3 * step) if start >= 0 else 0, step))); d += 1
        elif kind == 'intbool':                                     # ints and bools mixed: PyTorch reads int64
            vals = [bool(v) if v < 2 else int(v) for v in rng.integers(0, max(n, 1), 2)]
            items.append((kind, vals + [True])); d += 1
        elif kind in ('mask', 'boollist'):
            k = draw(st.integers(1, len(shape) - d)) if kind == 'mask' else 1
            sh = shape[d:d + k]
            if oob: sh = tuple(s + 1 for s in sh)                 # a mask of the wrong shape
            m = rng.integers(0, 2, sh).astype(bool)
            form = draw(st.sampled_from(['tensor', 'np', 'np uint8'])) if kind == 'mask' else 'list'
            items.append((kind, m, form)); d += k
        elif kind == 'ellipsis':
            items.append((kind,)); ellipses += 1; d = len(shape) if draw(st.booleans()) else d
        elif kind == 'none': items.append((kind,))
        else: items.append((kind, draw(st.booleans())))
    form = draw(st.sampled_from(['tuple', 'tuple', 'bare', 'list']))
    return items, form


def build(recipe, lib):
    "The key for 'mytorch' or 'torch'."
    items, form = recipe
    make = tensor if lib == 'mytorch' else torch.tensor
    dtypes = {'int64': int64, 'int32': int32} if lib == 'mytorch' else {'int64': torch.int64, 'int32': torch.int32}
    out = []
    for item in items:
        kind = item[0]
        if kind == 'int': out.append(item[1])
        elif kind == 'npint': out.append(np.int64(item[1]))
        elif kind == 'int0d': out.append(make(item[1]))
        elif kind == 'slice':
            s, as_tensors = item[1], item[2]
            out.append(slice(*(make(b) if as_tensors and b is not None else b for b in (s.start, s.stop, s.step))))
        elif kind in ('list', 'nested', 'intbool'): out.append(item[1] if kind == 'intbool' else item[1].tolist())
        elif kind == 'tuple': out.append(tuple(item[1].tolist()))
        elif kind == 'range': out.append(item[1])
        elif kind == 'np': out.append(item[1])
        elif kind == 'tensor': out.append(make(item[1], dtype=dtypes[item[1].dtype.name]))
        elif kind == 'boollist': out.append(item[1].tolist())
        elif kind == 'mask':
            m, f = item[1], item[2]
            out.append(make(m) if f == 'tensor' else m.astype(np.uint8) if f == 'np uint8' else m)
        elif kind == 'ellipsis': out.append(Ellipsis)
        elif kind == 'none': out.append(None)
        elif kind == 'bool': out.append(item[1])
        else: out.append(make(item[1]))                           # bool0d
    if form == 'bare' and len(out) == 1: return out[0]
    if form == 'list' and out: return out
    return tuple(out)


def torch_result(a, kt):
    "PyTorch's x[key] on a tensor of a's numbers, or the exception it raises."
    try: return torch.tensor(a)[kt]
    except Exception as e: return e


def refuses_like_torch(f, theirs):
    "f() must raise an error of the type PyTorch raised (a ValueError or TypeError counts for a malformed key)."
    with pytest.raises(Exception) as info: f()
    mine = info.value
    ok = (type(theirs),) + ((IndexError, ValueError, TypeError) if isinstance(theirs, (RuntimeError, ValueError)) else ())
    assert isinstance(mine, ok), f"PyTorch raised {type(theirs).__name__}: {theirs}; MyTorch {type(mine).__name__}: {mine}"


def lenient(a, km, yt) -> bool:
    "PyTorch checks no bounds where the key selects nothing; MyTorch does. Such keys are not compared."
    if yt.numel(): return False
    try: tensor(a)[km]
    except IndexError as e: return 'out of bounds' in str(e) or 'does not match' in str(e) or 'covers' in str(e)
    return False


def numpy_mask_and_ellipsis(recipe) -> bool:
    """PyTorch counts a NumPy mask over k > 1 dimensions as one dimension when it works out what `...` stands for (a
    tensor mask it counts as k), so such keys go wrong there; they are left out."""
    items = recipe[0]
    return (any(i[0] == 'ellipsis' for i in items)
            and any(i[0] == 'mask' and i[2] != 'tensor' and i[1].ndim > 1 for i in items))


@EXAMPLES
@given(shape=shapes, data=st.data(), seed=seeds)
def test_getitem_any_key(shape, data, seed):
    "x[key]: PyTorch's values, shape, layout and gradient (repeats add up), or PyTorch's kind of refusal."
    recipe = data.draw(recipes(shape))
    assume(not numpy_mask_and_ellipsis(recipe))
    a = np.random.default_rng(seed).standard_normal(shape)
    km, kt = build(recipe, 'mytorch'), build(recipe, 'torch')
    yt = torch_result(a, kt)
    if isinstance(yt, Exception): return refuses_like_torch(lambda: tensor(a)[km], yt)
    assume(not lenient(a, km, yt))
    differential(lambda x: x[km], lambda x: x[kt], [a], seed, exact=True)


@EXAMPLES
@given(shape=shapes, data=st.data(), seed=seeds)
def test_setitem_any_key(shape, data, seed):
    """y = x * 1; y[key] = v for keys without repeated positions: PyTorch's values and the gradients to x (zero where
    overwritten) and to v (summed where it broadcast), or PyTorch's kind of refusal."""
    recipe = data.draw(recipes(shape))
    assume(not numpy_mask_and_ellipsis(recipe))
    # PyTorch's write refuses a uint8 mask on some paths (masked_fill_: "only supports boolean masks"); reads test them
    assume(not any(i[0] == 'mask' and i[2] == 'np uint8' for i in recipe[0]))
    a = np.random.default_rng(seed).standard_normal(shape)
    km, kt = build(recipe, 'mytorch'), build(recipe, 'torch')
    yt = torch_result(a, kt)
    if isinstance(yt, Exception):
        def write(): y = tensor(a); y[km] = 1.0
        return refuses_like_torch(write, yt)
    assume(not lenient(a, km, yt))
    pos = torch.arange(math.prod(shape)).reshape(shape)[kt].reshape(-1)
    assume(len(pos) == len(torch.unique(pos)))          # which of repeated writes survives is unspecified in PyTorch
    target = tuple(yt.shape)
    drop = data.draw(st.integers(0, len(target)))
    ones = data.draw(st.lists(st.booleans(), min_size=len(target) - drop, max_size=len(target) - drop))
    vshape = tuple(1 if o else s for s, o in zip(target[drop:], ones))
    if data.draw(st.booleans()): vshape = (1,) + vshape   # a leading 1, which assignment ignores
    v = np.random.default_rng(seed + 1).standard_normal(vshape)

    def f(x, v): y = x * 1.0; y[km] = v; return y
    def ft(x, v): y = x * 1.0; y[kt] = v; return y
    differential(f, ft, [a, v], seed, exact=math.prod(vshape) == math.prod(target))   # no broadcast sum


# ---------------------------------------------------------------- the cases the idioms depend on, spelled out
def test_range_and_target_idiom():
    "x[range(n), target], the likelihood of each example's class in PyTorch's tutorials, with its gradient."
    p = np.random.default_rng(0).standard_normal((4, 3))
    target = [2, 0, 1, 2]
    differential(lambda x: x[range(4), target], lambda x: x[range(4), target], [p], exact=True)
    differential(lambda x: x[range(4), tensor(target)], lambda x: x[range(4), torch.tensor(target)], [p], exact=True)


@pytest.mark.parametrize('key', [
    (slice(None), [0, 1], Ellipsis, [0, 1]),       # `...` of zero width: adjacent, in place
    (slice(None), [0, 1], None, [0, 1]),           # None separates: advanced dimensions first
    (slice(None), [0, 1], 0, [0, 1]),              # an int does not separate (it selects first)
    ([0, 1], slice(None), [1, 2]),                 # a slice separates
    (True, slice(None), [0, 1]),                   # True is an advanced index on a new dimension
    (Ellipsis, [0, 1], Ellipsis),                  # two `...`: the second stands for nothing
    (Ellipsis, 0, Ellipsis),                       # the same without arrays: a view
], ids=['zero-width ...', 'None between', 'int between', 'slice between', 'True and an array', 'two ...',
        'two ... around an int'])
def test_placement_rule(key):
    "Where the advanced dimensions land, on a tensor whose sizes tell them apart."
    a = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
    differential(lambda x: x[key], lambda x: x[key], [a], exact=True)


def test_sequences_read_as_tuples():
    "A short list holding lists, slices, None or tensors is a tuple of indices, as in PyTorch; with a warning."
    a = np.arange(60.0).reshape(3, 4, 5)
    for key in ([[0, 1], [2, 0]], [0, slice(None)], [None, 0], [tensor(0), 1]):
        with pytest.warns(UserWarning, match='indexes as a tuple'): mine = tensor(a)[key]
        tkey = [torch.tensor(0), 1] if isinstance(key[0], type(tensor(0))) else key
        assert mine.numpy().tolist() == torch.tensor(a)[tkey].numpy().tolist()
    assert tensor(a)[np.array([[0, 1], [2, 0]])].shape == (2, 2, 4, 5)   # a NumPy array is one index


def test_uint8_is_a_mask():
    "A uint8 index is a boolean mask, as in PyTorch (which deprecates it), never positions 0 and 1."
    a = np.arange(12.0).reshape(3, 4)
    m = np.array([1, 0, 1], dtype=np.uint8)
    with pytest.warns(UserWarning, match='boolean mask'): mine = tensor(a)[tensor(m)]
    assert mine.numpy().tolist() == torch.tensor(a)[torch.tensor(m)].numpy().tolist() == [a[0].tolist(), a[2].tolist()]


@pytest.mark.parametrize('key, error, words', [
    (1.5, IndexError, 'Convert it with int(...)'),
    (np.bool_(True), IndexError, 'position 0 of the key is bool'),
    ('a', TypeError, 'a string cannot index'),
    ((0, 0, 0, 0), IndexError, 'too many indices for a tensor of dimension 3'),
    ((slice(None), 4), IndexError, 'index 4 is out of bounds for dimension 1 with size 4'),
    ((slice(0.5, 2),), TypeError, 'slice indices must be integers'),
    ((slice(None, None, 0),), ValueError, 'slice step cannot be zero'),
    (([[0, 1], [2]], slice(None)), ValueError, 'ragged'),
    (np.array([0, 1], np.int8).view(np.int8), None, None),        # accepted: NumPy arrays of any integer type
])
def test_refusals(key, error, words):
    "What PyTorch refuses, MyTorch refuses, with a message naming the index and what to do."
    a = np.zeros((3, 4, 5))
    if error is None:
        assert tensor(a)[key].shape == tuple(torch.tensor(a)[key].shape)
        return
    with pytest.raises(Exception): torch.tensor(a)[key]
    with pytest.raises(error, match=None) as info: tensor(a)[key]
    assert words in str(info.value), str(info.value)


def test_int_tensors_of_other_widths_are_refused():
    "int8 and int16 tensors are not indices in PyTorch: refused, with the conversion to write."
    a = np.zeros((3, 4))
    for dt, tdt in (('int8', torch.int8), ('int16', torch.int16)):
        with pytest.raises(IndexError): torch.tensor(a)[torch.tensor([0, 1], dtype=tdt)]
        from mytorch import engine
        with pytest.raises(IndexError, match=r'idx.long\(\)'): tensor(a)[tensor([0, 1], dtype=getattr(engine, dt))]


def test_float_sequences_are_refused():
    "PyTorch truncates a list of floats to positions (1.7 becomes 1); MyTorch refuses instead of guessing."
    a = np.zeros((3, 4))
    assert torch.tensor(a)[[1.7]].shape == (1, 4)
    with pytest.raises(IndexError, match='PyTorch truncates them silently'): tensor(a)[[1.7]]


def test_write_false_is_nothing():
    "x[False] = v writes nothing, whatever v's shape, as in PyTorch."
    x, xt = tensor(np.zeros((2, 3))), torch.zeros((2, 3), dtype=torch.float64)
    x[False] = tensor(np.ones(7)); xt[False] = torch.ones(7, dtype=torch.float64)
    assert x.numpy().tolist() == xt.numpy().tolist()
