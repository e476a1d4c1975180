"""The training kernels against their NumPy references: `index_add_rows` (nbs/15_indexing.ipynb,
kernels/indexing.pyx), `adam_update` (nbs/30_optim.ipynb, kernels/optim.pyx), `lstm_gates` and
`lstm_gates_backward` (nbs/28_recurrent.ipynb, kernels/recurrent.pyx).

Each compiled kernel makes its reference's roundings in its reference's order, so the two are
compared bit for bit. Tests that need a compiled kernel skip, with the reason, when it is not
built; when the `CI` environment variable is set they fail instead, because `make test` builds
the extensions and a missing one there is a broken build (as in tests/test_kernels.py).
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import checked_reference, compiled_twin as compiled
from mytorch.gradient_check import assert_close

import mytorch
import mytorch.kernels as K
from mytorch.indexing import index_add_rows
from mytorch.nn.recurrent import lstm_gates, lstm_gates_backward
from mytorch.optim import adam_update

ROOT = Path(__file__).resolve().parents[1]
DTYPES = [np.float32, np.float64]
DT_IDS = ["float32", "float64"]
KERNELS = {"index_add_rows": index_add_rows, "adam_update": adam_update, "lstm_gates": lstm_gates,
           "lstm_gates_backward": lstm_gates_backward}
EXTENSIONS = {"index_add_rows": "indexing", "adam_update": "optim", "lstm_gates": "recurrent",
              "lstm_gates_backward": "recurrent"}


def both(kernel):
    "[reference, compiled] as pytest params; the compiled one skips/fails without the extension."
    return [pytest.param("reference", id="reference"), pytest.param("compiled", id="compiled")]


def impl(kernel, which):
    "One implementation of `kernel`, behind the kernel's check, as a call runs it."
    return checked_reference(kernel) if which == "reference" else compiled(kernel)


def assert_same(got, want):
    "Bit for bit: same dtype, shape, and values (NaN where NaN)."
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def same_error(fn_a, fn_b, *args):
    "Both raise the same exception type with the same message; returns the message."
    with pytest.raises(Exception) as a:
        fn_a(*args)
    with pytest.raises(type(a.value)) as b:
        fn_b(*args)
    assert str(a.value) == str(b.value)
    return str(a.value)


def scatter_in_float64(out, index, src):
    """(n, sums, scale) of out[index[i]] += src[i] computed in float64 from the same numbers: the most terms added
    into one row (its first value included), the float64 sums, and the sums of |terms| (assert_close's scale)."""
    sums, size, count = out.astype(np.float64), np.abs(out.astype(np.float64)), np.ones(len(out), np.int64)
    np.add.at(sums, index, src.astype(np.float64))
    np.add.at(size, index, np.abs(src.astype(np.float64)))
    np.add.at(count, index, 1)
    return int(count.max()), sums, size


# -- index_add_rows -------------------------------------------------------------------------------

def test_index_add_rows_small_example():
    out = np.zeros((4, 2))
    res = index_add_rows(out, np.array([1, 3, 1, 1, -1, 0]), np.arange(12.0).reshape(6, 2))
    assert res is out
    assert out.tolist() == [[10.0, 11.0], [10.0, 13.0], [0.0, 0.0], [10.0, 12.0]]


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("layout", ["contiguous", "fortran-out", "strided-out", "strided-src", "transposed-src",
                                    "strided-index", "rows-3d"])
def test_index_add_rows_matches_reference(dtype, layout):
    cy = compiled(index_add_rows)
    rng = np.random.default_rng(1)
    n, m = 13, 200
    base = rng.standard_normal((n, 7)).astype(dtype)
    index = rng.integers(-n, n, m)                       # negative entries and many repeats
    src = rng.standard_normal((m, 7)).astype(dtype)
    if layout == "strided-src": src = rng.standard_normal((2 * m, 7)).astype(dtype)[::2]
    if layout == "transposed-src": src = np.ascontiguousarray(src.T).T
    if layout == "strided-index": index = rng.integers(-n, n, 2 * m)[::2]
    if layout == "rows-3d":
        base, src = rng.standard_normal((n, 3, 4)).astype(dtype), rng.standard_normal((m, 3, 4)).astype(dtype)

    def out_of(b):
        if layout == "fortran-out": return np.asfortranarray(b)
        if layout == "strided-out":
            big = np.zeros((n, 14), dtype); big[:, ::2] = b; return big[:, ::2]
        return b.copy()

    want, got = out_of(base), out_of(base)
    r1, r2 = index_add_rows.reference(want, index, src), cy(got, index, src)
    assert r1 is want and r2 is got                      # in place, whatever the layout: written back
    assert_same(got, want)
    n, ref, size = scatter_in_float64(base, index, src)
    assert_close(got, ref, dtype=dtype, n=n, scale=size)


@pytest.mark.parametrize("idx_dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint16, np.uint64, np.intp])
def test_index_add_rows_index_dtypes(idx_dtype):
    cy = compiled(index_add_rows)
    index = np.array([0, 2, 2, 1, 0], idx_dtype)
    src = np.arange(15.0).reshape(5, 3)
    assert_same(cy(np.zeros((3, 3)), index, src), index_add_rows.reference(np.zeros((3, 3)), index, src))


@pytest.mark.parametrize("which", both(index_add_rows))
def test_index_add_rows_edge_cases(which):
    f = impl(index_add_rows, which)
    e = np.empty(0, np.int64)
    assert_same(f(np.ones((3, 2)), e, np.zeros((0, 2))), np.ones((3, 2)))            # nothing to add
    assert_same(f(np.ones((3, 0)), np.array([0, 2]), np.zeros((2, 0))), np.ones((3, 0)))   # rows of no numbers
    assert_same(f(np.zeros(3, np.float32), np.array([2, 2, 0]), np.ones(3, np.float32)),
                np.array([1, 0, 2], np.float32))                                     # 1-D: rows are numbers
    assert_same(f(np.zeros((0, 4)), e, np.zeros((0, 4))), np.zeros((0, 4)))
    x = f(np.zeros((2, 2)), np.array([0, 1, 0]), np.array([[np.nan, 1], [np.inf, 2], [1, np.inf]]))
    assert np.isnan(x[0, 0]) and x[0, 1] == np.inf and x[1].tolist() == [np.inf, 2]
    with np.errstate(over="ignore"):                                                # NumPy warns, the loop does not
        f32 = f(np.zeros((1, 1), np.float32), np.zeros(3, int), np.full((3, 1), 3e38, np.float32))
    assert f32[0, 0] == np.inf                                                      # float32 overflows as NumPy's


@pytest.mark.parametrize("which", both(index_add_rows))
def test_index_add_rows_src_overlapping_out(which):
    "src a view of out: the values src had at the call are added, as np.add.at does."
    out = np.arange(8.0).reshape(4, 2)
    impl(index_add_rows, which)(out, [1, 2, 3], out[0:3])
    assert out.tolist() == [[0.0, 1.0], [2.0, 4.0], [6.0, 8.0], [10.0, 12.0]]


def test_index_add_rows_float32_accumulates_in_float32():
    "Sequential float32 additions, as np.add.at makes them: 1e8 + 1 + ... stays 1e8 in float32."
    cy = compiled(index_add_rows)
    src = np.array([[1e8]] + [[1.0]] * 10, np.float32)
    idx = np.zeros(11, int)
    assert_same(cy(np.zeros((1, 1), np.float32), idx, src), index_add_rows.reference(np.zeros((1, 1), np.float32), idx, src))
    assert cy(np.zeros((1, 1), np.float32), idx, src)[0, 0] == np.float32(1e8)


BAD_INDEX_ADD = [
    ("out-not-array", lambda: ([0.0, 1.0], [0], [1.0])),
    ("int-out", lambda: (np.zeros((2, 2), int), [0], np.ones((1, 2), int))),
    ("mixed-dtypes", lambda: (np.zeros((2, 2)), [0], np.ones((1, 2), np.float32))),
    ("float16", lambda: (np.zeros((2, 2), np.float16), [0], np.ones((1, 2), np.float16))),
    ("float-index", lambda: (np.zeros((2, 2)), np.array([0.0]), np.ones((1, 2)))),
    ("bool-index", lambda: (np.zeros((2, 2)), np.array([True]), np.ones((1, 2)))),
    ("0-d-out", lambda: (np.zeros(()), [0], np.ones(1))),
    ("2-d-index", lambda: (np.zeros((2, 2)), np.zeros((1, 1), int), np.ones((1, 1, 2)))),
    ("src-shape", lambda: (np.zeros((2, 3)), [0, 1], np.ones((2, 2)))),
    ("src-rows", lambda: (np.zeros((2, 3)), [0, 1], np.ones((3, 3)))),
    ("too-big", lambda: (np.zeros((2, 3)), [0, 2, 5], np.ones((3, 3)))),
    ("too-negative", lambda: (np.zeros((2, 3)), [0, -3, 1], np.ones((3, 3)))),
    ("huge-uint64", lambda: (np.zeros((2, 3)), np.array([1, 2**64 - 1], np.uint64), np.ones((2, 3)))),
]


def read_only():
    out = np.zeros((2, 2)); out.flags.writeable = False
    return out, [0], np.ones((1, 2))


@pytest.mark.parametrize("case", [c for c, _ in BAD_INDEX_ADD] + ["read-only"])
def test_index_add_rows_errors_match(case):
    cy = compiled(index_add_rows)
    args = read_only() if case == "read-only" else dict(BAD_INDEX_ADD)[case]()
    msg = same_error(checked_reference(index_add_rows), cy, *args)
    assert msg.startswith("index_add_rows: ")


@pytest.mark.parametrize("which", both(index_add_rows))
def test_index_add_rows_error_messages(which):
    f = impl(index_add_rows, which)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for out's 2 rows \(out has shape \(2, 3\); "
                                         r"valid indices are -2\.\.1\)"):
        f(np.zeros((2, 3)), [0, 5, 7], np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"src has shape \(2, 2\), but out \(2, 3\) and index \(2,\) need \(2, 3\)"):
        f(np.zeros((2, 3)), [0, 1], np.ones((2, 2)))
    with pytest.raises(TypeError, match=r"out has dtype float64 and src float32.*float32 or float64"):
        f(np.zeros((2, 2)), [0], np.ones((1, 2), np.float32))
    with pytest.raises(TypeError, match=r"index must be an integer array, got float64"):
        f(np.zeros((2, 2)), np.array([0.0]), np.ones((1, 2)))
    out = np.zeros((2, 3))
    with pytest.raises(IndexError):
        f(out, [0, 9], np.ones((2, 3)))
    assert not out.any()                                      # a bad index changes nothing


def test_indexing_backward_uses_the_scatter_add():
    "x[idx], x[:, idx] and index_select along dim 1: gradients equal np.add.at's, repeats and negatives included."
    rng = np.random.default_rng(3)
    for dtype in (mytorch.float32, mytorch.float64):
        x = mytorch.tensor(rng.standard_normal((5, 6)), dtype=dtype, requires_grad=True)
        idx = np.array([4, 0, 4, -1, 2, 0, 0])
        g1 = rng.standard_normal((7, 6))
        g2 = rng.standard_normal((5, 7))
        idx2 = np.array([[1, 1], [5, 0]])
        g3 = rng.standard_normal((2, 2, 6))
        (x[idx] * mytorch.tensor(g1, dtype=dtype)).sum().backward()
        (x[:, idx[idx >= 0]] * mytorch.tensor(g2[:, :6], dtype=dtype)).sum().backward()
        (x[mytorch.tensor(idx2 % 5)] * mytorch.tensor(g3, dtype=dtype)).sum().backward()
        g4, g5 = rng.standard_normal(7), rng.standard_normal(4)
        (x[idx % 5, 1] * mytorch.tensor(g4, dtype=dtype)).sum().backward()   # a strided view
        (x[2, mytorch.tensor([5, 0, 5, -2])] * mytorch.tensor(g5, dtype=dtype)).sum().backward()        # a row
        # np.add.at in float64 on the numbers the tensors hold (rounded to dtype), and the sizes and counts of the terms
        held = lambda a: np.asarray(a).astype(dtype).astype(np.float64)
        want, size, count = np.zeros((5, 6)), np.zeros((5, 6)), np.zeros((5, 6), np.int64)
        for view, index, g in ((lambda a: a[:, 1], idx % 5, g4), (lambda a: a[2], [5, 0, 5, -2], g5),
                               (lambda a: a, idx, g1), (lambda a: a.T, idx[idx >= 0], g2[:, :6].T),
                               (lambda a: a, idx2 % 5, g3)):
            np.add.at(view(want), index, held(g))
            np.add.at(view(size), index, np.abs(held(g)))
            np.add.at(view(count), index, np.ones_like(held(g), np.int64))
        assert_close(x.grad, want, dtype=dtype, n=int(count.max()), scale=size)
        assert x.grad.numpy().dtype == (np.float32 if dtype == mytorch.float32 else np.float64)


def test_embedding_backward_matches_add_at():
    from mytorch.nn.layers import EmbeddingBackward
    rng = np.random.default_rng(4)
    for dtype in DTYPES:
        g = rng.standard_normal((3, 5, 4)).astype(dtype)
        idx = rng.integers(0, 6, (3, 5))
        for pad in (None, 2):
            n, want, size = scatter_in_float64(np.zeros((6, 4), dtype), idx.reshape(-1), g.reshape(-1, 4))
            if pad is not None: want[pad] = size[pad] = 0   # the padding row: exactly zero
            got = EmbeddingBackward.apply(mytorch.tensor(g), idx, 6, pad).numpy()
            assert got.dtype == dtype
            assert_close(got, want, dtype=dtype, n=n, scale=size)


# -- adam_update ------------------------------------------------------------------------------------

CONFIGS = {  # weight_decay, amsgrad, maximize, decoupled
    "plain": (0.0, False, False, False), "amsgrad": (0.0, True, False, False), "maximize": (0.0, False, True, False),
    "l2": (0.1, False, False, False), "adamw": (0.05, False, False, True), "all": (0.1, True, True, False),
    "adamw-amsgrad-maximize": (0.02, True, True, True),
}


def adam_arrays(rng, shape, dtype, amsgrad, layout="contiguous"):
    x, g, m = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    v = rng.random(shape).astype(dtype)
    arrays = [x, g, m, v, (v * rng.random(shape) * 2).astype(dtype) if amsgrad else None]

    def lay(a):
        if a is None or layout == "contiguous": return a
        if layout == "fortran": return np.asfortranarray(a)
        if layout == "transposed": return np.ascontiguousarray(a.T).T
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype); big[..., ::2] = a
        return big[..., ::2]                                  # strided
    return [lay(a) for a in arrays]


def copies(arrays):
    return [None if a is None else a.copy(order="K") if a.flags.c_contiguous or a.flags.f_contiguous else
            _strided_copy(a) for a in arrays]


def _strided_copy(a):
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype); big[..., ::2] = a
    return big[..., ::2]


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("layout", ["contiguous", "fortran", "transposed", "strided"])
def test_adam_update_matches_reference(dtype, config, layout):
    cy = compiled(adam_update)
    wd, amsgrad, maximize, decoupled = CONFIGS[config]
    rng = np.random.default_rng(5)
    arrays = adam_arrays(rng, (9, 11), dtype, amsgrad, layout)
    want, got = copies(arrays), copies(arrays)
    for step in (1, 2, 3):                                    # three steps: the state carries over
        g = rng.standard_normal((9, 11)).astype(dtype)
        want[1] = got[1] = g
        adam_update.reference(*want, step, 0.01, 0.9, 0.999, 1e-8, wd, maximize, decoupled)
        cy(*got, step, 0.01, 0.9, 0.999, 1e-8, wd, maximize, decoupled)
        for a, b in zip(got, want):
            if a is not None: assert_same(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_adam_update_sizes_and_odd_hyperparameters(dtype):
    cy = compiled(adam_update)
    rng = np.random.default_rng(6)
    for n in (0, 1, 3, 17, 1000):
        for hyper in [(5, 0.3, 0.5, 0.7, 1e-3, 0.2, True, False), (100, 1e-4, 0.0, 0.0, 0.0, 0.0, False, True),
                      (7, 0.0, 0.99, 0.9999, 1.0, 3.0, False, False)]:
            arrays = adam_arrays(rng, (n,), dtype, amsgrad=n % 2 == 1)
            want, got = copies(arrays), copies(arrays)
            adam_update.reference(*want, *hyper)
            cy(*got, *hyper)
            for a, b in zip(got, want):
                if a is not None: assert_same(a, b)


@pytest.mark.parametrize("which", both(adam_update))
def test_adam_update_zero_dimensional_and_scalar_gradient(which):
    f = impl(adam_update, which)
    x, m, v = np.array(1.0), np.array(0.0), np.array(0.0)
    f(x, np.float64(2.0), m, v, None, 1, 0.1, 0.9, 0.999, 1e-8, 0.0, False, False)   # a NumPy scalar gradient
    assert x.shape == () and abs(float(x) - 0.9) < 1e-9 and float(m) == pytest.approx(0.2)


def test_adam_update_nan_and_inf_match():
    cy = compiled(adam_update)
    for wd, amsgrad, decoupled in [(0.0, False, False), (0.1, True, False), (0.1, False, True)]:
        x = np.array([np.inf, 1.0, np.nan, 2.0, -np.inf, 3.0])
        g = np.array([1.0, np.nan, 1.0, np.inf, 0.0, -2.0])
        arrays = [x, g, np.zeros(6), np.array([0, 0, 0, 0, 0, np.nan]), np.array([np.nan, 0, 0, 1, 0, 0]) if amsgrad else None]
        want, got = copies(arrays), copies(arrays)
        with np.errstate(invalid="ignore"):
            adam_update.reference(*want, 1, 0.1, 0.9, 0.999, 1e-8, wd, False, decoupled)
        cy(*got, 1, 0.1, 0.9, 0.999, 1e-8, wd, False, decoupled)
        for a, b in zip(got, want):
            if a is not None: assert_same(a, b)


def test_adam_update_errors_match():
    cy = compiled(adam_update)
    ok = lambda: [np.zeros((2, 3)) for _ in range(4)] + [None]
    hyper = (1, 0.1, 0.9, 0.999, 1e-8, 0.0, False, False)
    cases = []
    a = ok(); a[0] = a[0].astype(np.int64); cases.append(a)                   # integer param
    a = ok(); a[1] = a[1].astype(np.float32); cases.append(a)                 # mixed dtypes
    a = ok(); a[3] = np.zeros((3, 2)); cases.append(a)                        # wrong shape
    a = ok(); a[2] = None; cases.append(a)                                    # missing state
    a = ok(); a[4] = np.zeros(6); cases.append(a)                             # amsgrad state of the wrong shape
    a = ok(); a[2].flags.writeable = False; cases.append(a)                   # read-only state
    a = ok(); a[0] = [0.0] * 6; cases.append(a)                               # a list
    msgs = [same_error(checked_reference(adam_update), cy, *c, *hyper) for c in cases]
    assert all(m.startswith("adam_update: ") for m in msgs)
    assert "param has dtype int64" in msgs[0] and "grad has dtype float32 and param float64" in msgs[1]
    assert "exp_avg_sq has shape (3, 2) but param has (2, 3)" in msgs[2] and "exp_avg is None" in msgs[3]
    g = np.zeros((2, 3)); g.flags.writeable = False                           # a read-only gradient is fine
    cy(np.zeros((2, 3)), g, np.zeros((2, 3)), np.zeros((2, 3)), None, *hyper)


def test_adam_optimizer_runs_the_kernel_and_matches_reference():
    "Adam.step through whatever backend is active equals the reference applied by hand."
    rng = np.random.default_rng(8)
    x0 = [rng.standard_normal((4, 3)), rng.standard_normal(3), np.array(0.5)]
    grads = [[rng.standard_normal(a.shape) for a in x0] for _ in range(3)]
    for cls, kw in [(mytorch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
                    (mytorch.optim.AdamW, dict(lr=0.02, maximize=True))]:
        ps = [mytorch.tensor(a.copy(), requires_grad=True) for a in x0]
        opt = cls(ps, **kw)
        st = [[a.copy(), np.zeros_like(a), np.zeros_like(a), np.zeros_like(a)] for a in x0]
        g_ = opt.param_groups[0]
        for step, gs in enumerate(grads, 1):
            for p, g in zip(ps, gs): p.grad = mytorch.tensor(g)
            opt.step()
            for s, g in zip(st, gs):
                adam_update.reference(s[0], g, s[1], s[2], s[3] if g_['amsgrad'] else None, step, g_['lr'],
                                      *g_['betas'], g_['eps'], g_['weight_decay'], g_['maximize'],
                                      g_['decoupled_weight_decay'])
        for p, s in zip(ps, st): assert_same(p.detach().numpy(), s[0])


# -- lstm_gates and lstm_gates_backward ----------------------------------------------------------------

def gate_args(kernel, rng, B, H, dtype, scale=1.0):
    if kernel is lstm_gates:
        return [(scale * rng.standard_normal((B, 4 * H))).astype(dtype), rng.standard_normal((B, H)).astype(dtype),
                *(np.full((B, H), 7, dtype) for _ in range(3))]
    gates = rng.random((B, 4 * H)).astype(dtype)
    gates[:, 2 * H:3 * H] = 2 * gates[:, 2 * H:3 * H] - 1
    return [gates, *(rng.standard_normal((B, H)).astype(dtype) for _ in range(4)), np.full((B, 4 * H), 7, dtype)]


def strided(a):
    "A non-contiguous array with a's values (every other column of a wider array)."
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype); big[..., ::2] = a
    return big[..., ::2]


@pytest.mark.parametrize("name", ["lstm_gates", "lstm_gates_backward"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("layout", ["contiguous", "strided-inputs", "strided-all", "fortran-all", "slices"])
def test_gates_match_reference(name, dtype, layout):
    kernel = KERNELS[name]
    cy = compiled(kernel)
    rng = np.random.default_rng(9)
    for B, H in [(16, 64), (1, 1), (3, 5), (0, 4)]:
        args = gate_args(kernel, rng, B, H, dtype, scale=3.0)
        if layout == "strided-inputs": args = [strided(a) if k == 1 else a for k, a in enumerate(args)]
        if layout == "strided-all": args = [strided(a) for a in args]
        if layout == "fortran-all": args = [np.asfortranarray(a) for a in args]
        if layout == "slices":                      # row slices of stacked arrays, as the LSTM loop passes them
            args = [np.stack([np.zeros_like(a), a])[1] for a in args]
        want = [strided(a) if not a.flags.c_contiguous else a.copy() for a in args] if layout != "fortran-all" \
            else [np.asfortranarray(a.copy()) for a in args]
        got = [strided(a) if not a.flags.c_contiguous else a.copy() for a in args] if layout != "fortran-all" \
            else [np.asfortranarray(a.copy()) for a in args]
        r1, r2 = kernel.reference(*want), cy(*got)
        assert r1 is want[-1] and r2 is got[-1]
        for a, b in zip(got, want): assert_same(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_lstm_gates_extreme_preactivations(dtype):
    "e^{-z} overflows to inf for very negative z: the gate is 0 in both (NumPy warns; the warning is silenced here)."
    cy = compiled(lstm_gates)
    H = 3
    a = np.array([[1e4, -1e4, 0.0, 800.0, -800.0, 50.0, np.nan, 1.0, -1.0, 0.5, 2.0, np.inf]], dtype)
    args = [a, np.array([[1.0, -np.inf, 2.0]], dtype)] + [np.zeros((1, H), dtype) for _ in range(3)]
    want, got = [x.copy() for x in args], [x.copy() for x in args]
    with np.errstate(over="ignore", invalid="ignore"):
        lstm_gates.reference(*want)
        cy(*got)
    for p, q in zip(got, want): assert_same(p, q)
    assert want[0][0, 0] == 0 and want[0][0, 1] == 1


def test_gates_errors_match():
    rng = np.random.default_rng(10)
    for kernel in (lstm_gates, lstm_gates_backward):
        cy = compiled(kernel)
        name = kernel.__name__
        base = lambda: gate_args(kernel, rng, 2, 3, np.float64)
        cases = []
        a = base(); a[0] = a[0].astype(np.float16); cases.append(a)
        a = base(); a[2] = a[2].astype(np.float32); cases.append(a)
        a = base(); a[0] = a[0][:, :10]; cases.append(a)                      # 4H not a multiple of 4
        a = base(); a[1] = a[1][:1]; cases.append(a)                          # wrong batch
        a = base(); a[-1] = np.zeros((2, 5)); cases.append(a)                 # output of the wrong width
        a = base(); a[-1].flags.writeable = False; cases.append(a)            # read-only output
        a = base(); a[1] = a[1].tolist(); cases.append(a)                     # a list
        a = base(); a[0] = a[0][0]; cases.append(a)                           # 1-D
        msgs = [same_error(checked_reference(kernel), cy, *c) for c in cases]
        assert all(m.startswith(name + ": ") for m in msgs), msgs


def test_lstm_layer_matches_the_cell_loop_in_both_dtypes():
    "The fused LSTM (running the kernels that are active) against the lstm_cell loop, float32 and float64."
    from mytorch.nn.recurrent import LSTMSequence, _lstm_reference
    rng = np.random.default_rng(11)
    T, B, I, H = 5, 3, 4, 6
    for dtype in (mytorch.float64, mytorch.float32):
        mk = lambda *s: mytorch.tensor(rng.standard_normal(s) * 0.5, dtype=dtype, requires_grad=True)
        ins = (mk(T, B, I), mk(B, H), mk(B, H), mk(4 * H, I), mk(4 * H, H), mk(4 * H), mk(4 * H))
        for reverse in (False, True):
            a, b = LSTMSequence.apply(*ins, reverse), _lstm_reference(*ins, reverse=reverse)
            ups = [mytorch.tensor(rng.standard_normal(o.shape), dtype=dtype) for o in a]
            ga = mytorch.autograd.grad(a, ins, ups)
            gb = mytorch.autograd.grad(b, ins, ups)
            for p, q in zip(list(a) + list(ga), list(b) + list(gb)):
                # Each of the T steps adds I + H + 4 terms into a number, none larger than the largest value the
                # quantity reaches; the gates' slopes are at most 1, so the steps' errors add rather than grow.
                assert_close(p, q, dtype=dtype, n=I + H + 4, scale=T * np.abs(q.detach().numpy()).max())


# -- registration and dispatch ----------------------------------------------------------------------

def test_every_kernel_is_registered_with_a_bench():
    for name, kernel in KERNELS.items():
        k = K._registry[name]
        assert k.reference is kernel.reference and k.bench is not None and k.extension == EXTENSIONS[name]
        assert kernel.__name__ == name and kernel.__doc__ == kernel.reference.__doc__


@pytest.mark.parametrize("name", list(KERNELS))
def test_bench_arguments_run_both_and_agree(name):
    kernel = KERNELS[name]
    cy = compiled(kernel)
    for dtype in DTYPES:
        for n in (100, 10_000):
            a1 = K._registry[name].bench(np.random.default_rng(0), n, np.dtype(dtype))
            a2 = K._registry[name].bench(np.random.default_rng(0), n, np.dtype(dtype))
            assert sum(x.size for x in a1 if isinstance(x, np.ndarray)) >= n / 4    # about n numbers of work
            kernel.reference(*a1); cy(*a2)
            for p, q in zip(a1, a2):
                if isinstance(p, np.ndarray): assert_same(q, p)


def test_this_process_matches_its_environment():
    mode = os.environ.get("MYTORCH_KERNELS", "").strip().lower() or "auto"
    for name, kernel in KERNELS.items():
        backend = K.kernel_backend(name)
        if mode == "numpy": assert backend == "numpy (MYTORCH_KERNELS=numpy)"
        elif kernel.compiled is None: assert backend.startswith("numpy (extension")
        else: assert backend == ("cython" if (mode == "cython" or K._registry[name].default) else
                                 "numpy (off by default: it does not clearly beat NumPy in benchmarks/kernels.py)")


def run_python(code, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "MYTORCH_KERNELS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


PROBE = """
import numpy as np
import mytorch.indexing, mytorch.nn.recurrent, mytorch.optim
from mytorch.kernels import kernel_backend
for k in ('index_add_rows', 'adam_update', 'lstm_gates', 'lstm_gates_backward'): print(k, '|', kernel_backend(k))
m = mytorch.nn.LSTM(3, 4, dtype=mytorch.float64); out, _ = m(mytorch.ones(5, 2, 3, dtype=mytorch.float64))
out.sum().backward(); mytorch.optim.Adam(m.parameters()).step()
print(mytorch.indexing.index_add_rows(np.zeros(2), np.array([1, 1]), np.ones(2)).tolist())
"""


def test_without_the_extensions_the_references_run():
    block = "import sys\nfor e in ('indexing', 'optim', 'recurrent'): sys.modules['mytorch._' + e] = None\n"
    r = run_python(block + PROBE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for line in lines[:4]:
        assert line.split(" | ")[1].startswith("numpy (extension not built: "), line
    assert lines[4] == "[0.0, 2.0]"


def test_env_numpy_forces_the_references():
    r = run_python(PROBE, {"MYTORCH_KERNELS": "numpy"})
    assert r.returncode == 0, r.stderr
    assert [line.split(" | ")[1] for line in r.stdout.splitlines()[:4]] == ["numpy (MYTORCH_KERNELS=numpy)"] * 4


def test_integer_keys_go_through_index_add_rows(monkeypatch):
    "The backward of x[idx], x[:, idx], x[idx, 1] and x[2, idx] calls index_add_rows; x[idx, idx] stays with np.add.at."
    import mytorch.indexing as indexing
    calls = []
    real = indexing.index_add_rows
    monkeypatch.setattr(indexing, "index_add_rows", lambda *a: calls.append(a[0].shape) or real(*a))
    x = mytorch.tensor(np.ones((4, 5)), requires_grad=True)
    idx = mytorch.tensor([3, 0, 3])
    for read in (lambda: x[idx], lambda: x[:, idx], lambda: x[idx, 1], lambda: x[2, idx], lambda: x[idx, idx]):
        read().sum().backward()
    assert calls == [(4, 5), (5, 4), (4,), (5,)]
    want = np.ones((4, 5)) * 0
    for key in [(np.array([3, 0, 3]),), (slice(None), np.array([3, 0, 3])), (np.array([3, 0, 3]), 1),
                (2, np.array([3, 0, 3])), (np.array([3, 0, 3]), np.array([3, 0, 3]))]:
        np.add.at(want, key, 1.0)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_raw_compiled_kernels_refuse_what_would_read_or_write_out_of_bounds():
    """The contract is checked in Python, before either implementation; a compiled twin called directly, without
    the check, keeps only the guards that stand between a bad argument and memory outside an array."""
    for kernel in KERNELS.values():
        compiled(kernel)
    with pytest.raises(IndexError, match="out of range"):                 # a row past the end of out
        index_add_rows.compiled(np.zeros((2, 3)), np.array([0, 5]), np.ones((2, 3)))
    with pytest.raises(IndexError, match="out of range"):
        index_add_rows.compiled(np.zeros((2, 3)), np.array([-3]), np.ones((1, 3)))
    with pytest.raises(ValueError, match="sizes differ"):                 # a moment shorter than the parameter
        adam_update.compiled(np.zeros(4), np.zeros(4), np.zeros(3), np.zeros(4), None,
                             1, 0.1, 0.9, 0.999, 1e-8, 0.0, False, False)
    a, c_prev, c, tc, h = gate_args(lstm_gates, np.random.default_rng(0), 2, 3, np.float64)
    with pytest.raises(ValueError, match="shapes disagree"):              # c_prev of one row for a batch of two
        lstm_gates.compiled(a, c_prev[:1], c, tc, h)
    args = gate_args(lstm_gates_backward, np.random.default_rng(0), 2, 3, np.float64)
    args[3] = args[3][:, :2]
    with pytest.raises(ValueError, match="shapes disagree"):
        lstm_gates_backward.compiled(*args)
