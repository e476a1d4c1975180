"""The compiled convolution and pooling kernels (kernels/conv.pyx, kernels/pooling.pyx) against their
NumPy references (nbs/25_conv.ipynb, nbs/26_pooling.ipynb).

Each kernel is a function of its chapter marked with `@compiled_kernel`: `f.reference` is the
NumPy function as the chapter wrote it, `f.compiled` the compiled twin (None when the extension
is not built). The twins must return the same numbers, bit for bit: im2col and the max pool
copy, col2im adds each position's terms in the reference's order, and the scatter-add
accumulates in float64 in bincount's order. Tests of a compiled twin skip, with the reason,
when it is not built; when the `CI` environment variable is set they fail instead, because
`make test` builds the extensions (as in tests/test_kernels.py).
"""
import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import checked_reference, compiled_twin as twin, running

import mytorch
import mytorch.kernels as K
import mytorch.nn.conv as conv
import mytorch.nn.pooling as pooling
from mytorch.nn.conv import ConvGeometry, conv_output_size, conv2d, conv1d, conv_transpose2d
from mytorch.nn.pooling import max_pool1d, max_pool2d

ROOT = Path(__file__).resolve().parents[1]
DTYPES = [np.float32, np.float64]
NAMES = ("im2col", "col2im", "max_pool_with_indices", "plane_scatter_add")


# -- geometries and layouts ----------------------------------------------------------------

def geometry(H, W, kh, kw, sh=1, sw=1, dh=1, dw=1, pads=((0, 0), (0, 0))):
    (lh, hh), (lw, hw) = pads
    out = (conv_output_size(H, kh, sh, dh, lh, hh), conv_output_size(W, kw, sw, dw, lw, hw))
    assert min(out) >= 1, "a test geometry must have windows"
    return ConvGeometry((H, W), out, (kh, kw), (sh, sw), (dh, dw), (lh, lw), 1)


CONV_GEOMETRIES = {
    "3x3 same": geometry(7, 7, 3, 3, pads=((1, 1), (1, 1))),
    "3x3 valid": geometry(6, 5, 3, 3),
    "1x1": geometry(4, 5, 1, 1),
    "stride 2, padding 1": geometry(9, 8, 3, 3, 2, 2, pads=((1, 1), (1, 1))),
    "stride (3, 1), dilation (1, 2)": geometry(10, 9, 2, 3, 3, 1, 1, 2, pads=((0, 1), (2, 0))),
    "dilation 2, same": geometry(6, 6, 3, 3, 1, 1, 2, 2, pads=((2, 2), (2, 2))),
    "kernel reaches past the map": geometry(3, 2, 5, 5, 1, 1, 2, 2, pads=((4, 4), (4, 4))),
    "kernel as large as the map": geometry(5, 4, 5, 4),
    "padding larger than the kernel": geometry(3, 3, 2, 2, 2, 3, pads=((3, 2), (3, 3))),
    "stride larger than the kernel": geometry(11, 12, 2, 2, 4, 5, pads=((1, 0), (0, 1))),
    "one row": geometry(1, 9, 1, 3, 1, 2, pads=((0, 0), (1, 1))),
    "asymmetric 'same' (even kernel)": geometry(6, 7, 4, 2, pads=((1, 2), (0, 1))),
}


def layouts(a):
    "(name, array) pairs: the same numbers in the memory layouts a caller may pass."
    return [("contiguous", a),
            ("fortran", np.asfortranarray(a)),
            ("reversed batch", np.ascontiguousarray(a[::-1])[::-1]),
            ("sliced", np.repeat(a, 2, axis=1)[:, ::2]),
            ("transposed", np.ascontiguousarray(a.swapaxes(0, 1)).swapaxes(0, 1))]


# -- im2col --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CONV_GEOMETRIES)
def test_im2col_matches_reference(name, dtype):
    compiled, geom = twin(conv.im2col), CONV_GEOMETRIES[name]
    x = np.random.default_rng(0).standard_normal((3, 2) + geom.in_size).astype(dtype)
    want = conv.im2col.reference(x, geom)
    for layout, view in layouts(x):
        got = compiled(view, geom)
        assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous, layout
        np.testing.assert_array_equal(got, want, err_msg=layout)


def test_im2col_writes_into_out():
    compiled, geom = twin(conv.im2col), CONV_GEOMETRIES["stride 2, padding 1"]
    x = np.random.default_rng(1).standard_normal((2, 3) + geom.in_size)
    out = np.full((2, 3) + geom.kernel + geom.out_size, np.nan)
    assert compiled(x, geom, out=out) is out
    np.testing.assert_array_equal(out, conv.im2col.reference(x, geom))
    assert compiled(x, geom, out) is out          # positionally, as the reference takes it


@pytest.mark.parametrize("bad, says", [
    (lambda shape: np.empty(shape, np.float32), "C-contiguous float64 array of shape"),
    (lambda shape: np.empty(shape[:-1] + (shape[-1] + 1,)), "float64 of shape"),
    (lambda shape: np.empty(shape[::-1]).T, "not contiguous"),
    (lambda shape: [[0.0]], "got list"),
])
def test_im2col_refuses_a_bad_out(bad, says):
    compiled, geom = twin(conv.im2col), CONV_GEOMETRIES["3x3 same"]
    x = np.zeros((2, 1) + geom.in_size)
    with pytest.raises(ValueError, match="im2col: out must be") as e:
        compiled(x, geom, out=bad((2, 1) + geom.kernel + geom.out_size))
    assert says in str(e.value) and "out=None" in str(e.value)


def test_im2col_errors():
    compiled, geom = twin(conv.im2col), CONV_GEOMETRIES["3x3 same"]
    with pytest.raises(TypeError, match=r"im2col: x has dtype int64.*float32 or float64.*im2col.reference"):
        compiled(np.zeros((1, 1, 7, 7), np.int64), geom)
    with pytest.raises(TypeError, match="x has dtype float16"):
        compiled(np.zeros((1, 1, 7, 7), np.float16), geom)
    with pytest.raises(ValueError, match=r"im2col: x must be 4-D \(N, C, H, W\), got shape \(7, 7\)"):
        compiled(np.zeros((7, 7)), geom)
    with pytest.raises(ValueError, match="stride or dilation below 1"):
        compiled(np.zeros((1, 1, 7, 7)), geom._replace(stride=(0, 1)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_im2col_edges(dtype):
    compiled, geom = twin(conv.im2col), CONV_GEOMETRIES["3x3 same"]
    empty = compiled(np.zeros((0, 2, 7, 7), dtype), geom)
    assert empty.shape == (0, 2, 3, 3, 7, 7) and empty.dtype == dtype
    # an input of zero width read only through padding: every column entry is a zero
    g0 = ConvGeometry((2, 0), (2, 1), (1, 3), (1, 1), (1, 1), (0, 1), 1)
    np.testing.assert_array_equal(compiled(np.zeros((1, 1, 2, 0), dtype), g0), np.zeros((1, 1, 1, 3, 2, 1)))
    nan_inf = np.array([[[[np.nan, np.inf], [-np.inf, 1.0]]]], dtype)
    g = geometry(2, 2, 2, 2, pads=((1, 1), (1, 1)))
    np.testing.assert_array_equal(compiled(nan_inf, g), conv.im2col.reference(nan_inf, g))


# -- col2im --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CONV_GEOMETRIES)
def test_col2im_matches_reference(name, dtype):
    compiled, geom = twin(conv.col2im), CONV_GEOMETRIES[name]
    cols = np.random.default_rng(2).standard_normal((3, 2) + geom.kernel + geom.out_size).astype(dtype)
    want = conv.col2im.reference(cols, geom)
    for layout, view in layouts(cols):
        got = compiled(view, geom)
        assert got.dtype == want.dtype and got.shape == (3, 2) + geom.in_size, layout
        np.testing.assert_array_equal(got, want, err_msg=layout)   # the same terms, added in the same order


@pytest.mark.parametrize("name", ["3x3 same", "dilation 2, same", "kernel reaches past the map"])
def test_col2im_matches_the_whole_rows_version(name):
    "Where the layer used _col2im_rows (stride 1, Wo == W), the compiled col2im gives the same numbers."
    compiled, geom = twin(conv.col2im), CONV_GEOMETRIES[name]
    cols = np.random.default_rng(3).standard_normal((2, 3) + geom.kernel + geom.out_size)
    np.testing.assert_array_equal(compiled(cols, geom), conv._col2im_rows(cols.copy(), geom))


@pytest.mark.parametrize("name", CONV_GEOMETRIES)
def test_col2im_is_the_adjoint_of_im2col(name):
    im2col, col2im, geom = twin(conv.im2col), twin(conv.col2im), CONV_GEOMETRIES[name]
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3) + geom.in_size)
    c = rng.standard_normal((2, 3) + geom.kernel + geom.out_size)
    lhs, rhs = float((im2col(x, geom) * c).sum()), float((x * col2im(c, geom)).sum())
    assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs))


def test_col2im_leaves_its_input_alone():
    compiled, geom = twin(conv.col2im), CONV_GEOMETRIES["3x3 same"]
    cols = np.random.default_rng(5).standard_normal((2, 2) + geom.kernel + geom.out_size)
    before = cols.copy()
    compiled(cols, geom)
    np.testing.assert_array_equal(cols, before)


def test_col2im_errors_and_edges():
    compiled, geom = twin(conv.col2im), CONV_GEOMETRIES["3x3 same"]
    with pytest.raises(TypeError, match="col2im: cols has dtype int32"):
        compiled(np.zeros((1, 1, 3, 3, 7, 7), np.int32), geom)
    with pytest.raises(ValueError, match=r"col2im: cols must be 6-D \(N, C, kh, kw, Ho, Wo\), got shape \(3, 3, 7, 7\)"):
        compiled(np.zeros((3, 3, 7, 7)), geom)
    for dtype in DTYPES:
        empty = compiled(np.zeros((0, 4, 3, 3, 7, 7), dtype), geom)
        assert empty.shape == (0, 4, 7, 7) and empty.dtype == dtype


# -- the layer runs the same numbers either way ------------------------------------------------

@pytest.fixture
def conv_references(monkeypatch):
    "Make mytorch.nn.conv call the NumPy references of im2col and col2im (and its whole-rows col2im)."
    monkeypatch.setattr(conv, "im2col", conv.im2col.reference)
    monkeypatch.setattr(conv, "col2im", conv.col2im.reference)
    monkeypatch.setattr(conv, "_col2im_compiled", False)
    conv.im2col.reference = conv.im2col      # `_kernel` asks non-float dtypes for `.reference`
    conv.col2im.reference = conv.col2im


CONV_CASES = [  # (x shape, weight shape, arguments)
    ((4, 1, 12, 12), (8, 1, 3, 3), dict(padding=1)),
    ((3, 4, 9, 8), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    ((2, 6, 7, 7), (6, 1, 3, 3), dict(padding="same", groups=6)),
    ((2, 3, 10, 11), (4, 3, 5, 3), dict(stride=3, padding=2, dilation=(1, 2))),
]


def conv_numbers(x, w, b, kwargs):
    xt, wt, bt = (mytorch.tensor(a, requires_grad=True) for a in (x, w, b))
    y = conv2d(xt, wt, bt, **kwargs)
    (y * mytorch.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape).astype(x.dtype))).sum().backward()
    # the transposed convolution, the adjoint in the input, maps y back to x's channels (col2im's forward use)
    padding = kwargs.get("padding", 0)
    t = conv_transpose2d(y.detach(), mytorch.tensor(w), stride=kwargs.get("stride", 1), groups=kwargs.get("groups", 1),
                         padding=0 if isinstance(padding, str) else padding, dilation=kwargs.get("dilation", 1))
    return [y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy(), t.numpy()]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_layers_give_the_same_numbers_with_the_references(case, dtype, request):
    twin(conv.im2col), twin(conv.col2im)
    xs, ws, kwargs = CONV_CASES[case]
    rng = np.random.default_rng(6 + case)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in (xs, ws, (ws[0],)))
    with_kernels = conv_numbers(x, w, b, kwargs)
    request.getfixturevalue("conv_references")
    with_references = conv_numbers(x, w, b, kwargs)
    for got, want in zip(with_kernels, with_references):
        np.testing.assert_array_equal(got, want)


def test_conv_float16_uses_the_references():
    "The compiled kernels take float32 and float64 only; a float16 layer runs on the references."
    x, w = (mytorch.tensor(np.random.default_rng(7).standard_normal(s).astype(np.float16), requires_grad=True)
            for s in ((2, 2, 6, 6), (3, 2, 3, 3)))
    y = conv2d(x, w, padding=1)
    y.sum().backward()
    assert y.dtype == mytorch.float16 and x.grad.shape == (2, 2, 6, 6)
    y1 = conv1d(mytorch.tensor(np.ones((1, 2, 5), np.float16)), mytorch.tensor(np.ones((1, 2, 3), np.float16)))
    np.testing.assert_array_equal(y1.numpy(), np.full((1, 1, 3), 6, np.float16))


# -- max pool with indices -----------------------------------------------------------------

POOL_GRID = [  # kernel, stride, padding, dilation, ceil_mode
    (2, None, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True), ((2, 3), (1, 2), (1, 0), 1, False),
    ((3, 2), 1, (1, 1), (2, 1), True), (2, 3, 1, 2, True), ((3, 3), (2, 1), 0, 1, True), ((1, 3), 2, (0, 1), 2, False),
    (1, 1, 0, 1, False), (4, 4, 2, 1, True),
]
POOL_SIZES = [(5, 5), (6, 7), (7, 4), (1, 6), (8, 8)]


def pool_cases():
    for (H, W), (k, s, p, d, ceil) in itertools.product(POOL_SIZES, POOL_GRID):
        try: geo = pooling._geometry(mytorch.zeros(1, H, W), 2, "test", k, s, p, d, ceil)
        except RuntimeError: continue      # the windows do not fit this size
        yield pytest.param(H, W, geo, id=f"{H}x{W}-k{k}-s{s}-p{p}-d{d}-{'ceil' if ceil else 'floor'}")


def tied(rng, shape, dtype):
    "Small integers (ties everywhere), a nan, a -inf and an all -inf plane."
    a = rng.integers(-2, 3, size=shape).astype(dtype)
    H, W = shape[-2:]
    a[0, 0, 0, 0] = np.nan
    a[0, 1, H - 1, W - 1] = np.nan
    a[1, 0, H // 2, 0] = -np.inf
    a[1, 1] = -np.inf
    return a


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("H, W, geo", list(pool_cases()))
def test_max_pool_matches_reference(H, W, geo, dtype):
    compiled = twin(pooling.max_pool_with_indices)
    a = tied(np.random.default_rng(H * 100 + W), (3, 2, H, W), dtype)
    want_v, want_i = pooling.max_pool_with_indices.reference(a, geo)
    for layout, view in layouts(a):
        got_v, got_i = compiled(view, geo)
        assert got_v.dtype == want_v.dtype and got_i.dtype == np.int64, layout
        np.testing.assert_array_equal(got_i, want_i, err_msg=layout)   # ties: the first maximum; nans: the last one
        np.testing.assert_array_equal(got_v, want_v, err_msg=layout)   # (nan-aware: nan equals nan here)


def test_max_pool_nan_rules():
    compiled = twin(pooling.max_pool_with_indices)
    geo = pooling._geometry(mytorch.zeros(1, 1, 4), 2, "test", (1, 4), (1, 4), 0)
    a = np.array([[[[1.0, np.nan, 5.0, np.nan]], [[2.0, 2.0, 1.0, 2.0]], [[-np.inf] * 4]]])
    v, i = compiled(a, geo)
    assert i.ravel().tolist() == [3, 0, 0]             # the last nan; the first of tied maxima; the first real position
    assert np.isnan(v.ravel()[0]) and v.ravel()[1:].tolist() == [2.0, -np.inf]


@pytest.mark.parametrize("shape", [(7, 9), (2, 7, 9), (2, 2, 3, 7, 9), (0, 3, 7, 9), (3, 0, 7, 9)])
def test_max_pool_any_leading_dims(shape):
    compiled = twin(pooling.max_pool_with_indices)
    geo = pooling._geometry(mytorch.zeros(1, 7, 9), 2, "test", 3, 2, 1)
    a = np.random.default_rng(8).standard_normal(shape)
    (v, i), (rv, ri) = compiled(a, geo), pooling.max_pool_with_indices.reference(a, geo)
    assert v.shape == rv.shape == shape[:-2] + geo.out_size
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(v, rv)


def test_max_pool_errors():
    compiled = twin(pooling.max_pool_with_indices)
    geo = pooling._geometry(mytorch.zeros(1, 4, 4), 2, "test", 2, None, 0)
    with pytest.raises(TypeError, match=r"max_pool_with_indices: a has dtype int64.*float32 or float64"):
        compiled(np.zeros((1, 4, 4), np.int64), geo)
    with pytest.raises(ValueError, match=r"a must have at least 2 dims \(..., H, W\), got shape \(4,\)"):
        compiled(np.zeros(4), geo)
    with pytest.raises(ValueError, match="below 1"):
        compiled(np.zeros((1, 4, 4)), geo._replace(stride=(0, 2)))


def max_pool_definition(a, geo):
    "The max pool of planes a (..., H, W), window by window as PyTorch's loop scans it; -inf and -1 for a window with no input."
    (H, W), (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = (a.shape[-2:], geo.kernel, geo.stride, geo.padding,
                                                                geo.dilation, geo.out_size)
    planes = a.reshape(-1, H, W)
    vals, idx = np.full((len(planes), oh, ow), -np.inf, a.dtype), np.full((len(planes), oh, ow), -1, np.int64)
    for c, i, j in itertools.product(range(len(planes)), range(oh), range(ow)):
        for u, v in itertools.product(range(kh), range(kw)):
            h, w = i * sh - ph + u * dh, j * sw - pw + v * dw
            if not (0 <= h < H and 0 <= w < W): continue
            x = planes[c, h, w]
            if idx[c, i, j] < 0: idx[c, i, j] = h * W + w          # the first real position, in case nothing beats -inf
            if x > vals[c, i, j] or np.isnan(x): vals[c, i, j], idx[c, i, j] = x, h * W + w
    return vals.reshape(a.shape[:-2] + (oh, ow)), idx.reshape(a.shape[:-2] + (oh, ow))


def both(kernel):
    "The implementations of `kernel` to check, each behind the kernel's check: its reference, and its compiled twin where built (always under CI)."
    return [checked_reference(kernel)] + ([twin(kernel)] if kernel.compiled is not None or os.environ.get("CI") else [])


# Hand-made geometries (padding beyond kernel // 2, windows past the input) in which some windows have
# no tap inside the input and others do: the kernels' contract covers them, though PyTorch's sizes never make one.
G = pooling._Geometry
EMPTY_WINDOW_GEOMETRIES = {
    "first and last columns empty": G(2, (1, 2), (1, 1), (0, 3), (1, 2), False, (3, 4), (3, 8)),
    "last row empty": G(2, (2, 2), (2, 1), (2, 0), (3, 1), False, (2, 5), (3, 4)),
    "a middle row empty": G(2, (3, 1), (1, 1), (2, 0), (2, 1), False, (1, 2), (3, 2)),
    "every window empty (PyTorch's sizes)": G(2, (2, 2), (2, 2), (1, 1), (2, 2), True, (1, 5), (1, 3)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", EMPTY_WINDOW_GEOMETRIES)
def test_max_pool_windows_with_no_input(name, dtype):
    "Both implementations: -inf and the index -1 for a window whose taps all fall in the padding, the definition elsewhere."
    geo = EMPTY_WINDOW_GEOMETRIES[name]
    a = tied(np.random.default_rng(11), (3, 2) + geo.in_size, dtype)
    want_v, want_i = max_pool_definition(a, geo)
    empty = pooling._empty_windows(geo)
    assert empty is not None and (want_i[..., empty] == -1).all() and (want_i[..., ~empty] >= 0).all()
    for f in both(pooling.max_pool_with_indices):
        for layout, view in layouts(a):
            v, i = f(view, geo)
            np.testing.assert_array_equal(i, want_i, err_msg=f"{f} {layout}")
            np.testing.assert_array_equal(v, want_v, err_msg=f"{f} {layout}")


def test_max_pool_checks_the_geometry_against_the_input_in_both_implementations():
    geo = pooling._geometry(mytorch.zeros(1, 4, 4), 2, "test", 2, None, 0)
    for f in both(pooling.max_pool_with_indices):
        with pytest.raises(ValueError, match=r"made for an input of size \(4, 4\), but a has shape \(1, 5, 4\)"):
            f(np.zeros((1, 5, 4)), geo)
        with pytest.raises(ValueError, match=r"a must have at least 2 dims \(..., H, W\), got shape \(4,\)"):
            f(np.zeros(4), geo)
        with pytest.raises(ValueError, match="below 1"):
            f(np.zeros((1, 4, 4)), geo._replace(dilation=(1, 0)))


# -- plane_scatter_add ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("P, m, n", [(1, 1, 1), (3, 4, 6), (8, 50, 10), (64, 196, 784), (2, 0, 5)])
def test_scatter_add_matches_reference(P, m, n, dtype):
    compiled = twin(pooling.plane_scatter_add)
    rng = np.random.default_rng(P * m + n)
    g = (rng.standard_normal((P, m)) * 10.0 ** rng.integers(-3, 4, (P, m))).astype(dtype)
    idx = rng.integers(0, n, (P, m))                       # repeated positions add up
    want = pooling.plane_scatter_add.reference(g, idx, n)
    cases = [("contiguous", g, idx), ("int32 indices", g, idx.astype(np.int32)),
             ("fortran", np.asfortranarray(g), np.asfortranarray(idx)),
             ("sliced", np.repeat(g, 2, axis=1)[:, ::2], np.repeat(idx, 2, axis=1)[:, ::2])]
    for layout, gv, iv in cases:
        got = compiled(gv, iv, n)
        assert got.dtype == want.dtype and got.shape == (P, n), layout
        np.testing.assert_array_equal(got, want, err_msg=layout)   # float32 too: both accumulate in float64


def test_scatter_add_float32_accumulates_in_float64():
    compiled = twin(pooling.plane_scatter_add)
    g = np.array([[1.0, 1e-8, 1e-8, -1.0]], np.float32)  # in float32, 1 + 1e-8 == 1, and the small terms would vanish
    got = compiled(g, np.zeros((1, 4), np.int64), 1)
    assert got.dtype == np.float32 and got[0, 0] == np.float32(2e-8)
    np.testing.assert_array_equal(got, pooling.plane_scatter_add.reference(g, np.zeros((1, 4), np.int64), 1))


def test_scatter_add_errors():
    compiled = twin(pooling.plane_scatter_add)
    g, idx = np.ones((2, 3)), np.array([[0, 1, 2], [2, 5, 0]])
    with pytest.raises(IndexError, match=r"idx\[1, 1\] = 5 is out of range for planes of size 4 \(indices must lie in \[0, 4\)\)"):
        compiled(g, idx, 4)
    with pytest.raises(IndexError, match=r"idx\[0, 0\] = -1"):
        compiled(g, -np.ones((2, 3), np.int64), 4)
    with pytest.raises(IndexError, match="planes of size 0"):
        compiled(g, idx, 0)
    with pytest.raises(ValueError, match=r"g and idx must be 2-D arrays \(planes, values\) of one shape, got g \(2, 3\) and idx \(3, 2\)"):
        compiled(g, idx.T, 6)
    with pytest.raises(ValueError, match=r"got g \(6,\)"):
        compiled(g.ravel(), idx.ravel(), 6)
    with pytest.raises(TypeError, match="idx has dtype float64, but must hold integers"):
        compiled(g, idx.astype(float), 6)
    with pytest.raises(TypeError, match="plane_scatter_add: g has dtype int64"):
        compiled(idx, idx, 6)
    with pytest.raises(ValueError, match="must be non-negative"):
        compiled(g, idx, -1)
    assert compiled(np.ones((0, 3)), np.zeros((0, 3), np.int64), 4).shape == (0, 4)


@pytest.mark.parametrize("idx, says", [
    (np.array([[0, 4], [1, 2]]), r"idx\[0, 1\] = 4 is out of range for planes of size 4"),   # bincount: plane 1's bin 0
    (np.array([[0, 1], [-1, 2]]), r"idx\[1, 0\] = -1 is out of range for planes of size 4"),  # bincount: plane 0's last bin
    (np.array([[0, 1], [2, 9]]), r"idx\[1, 1\] = 9 is out of range for planes of size 4"),    # bincount: past every plane
])
def test_scatter_add_reference_checks_the_index_contract_as_the_compiled_does(idx, says):
    "An index outside its plane is refused by both implementations, with one message, before anything is added."
    g = np.ones((2, 2))
    messages = set()
    for f in both(pooling.plane_scatter_add):
        with pytest.raises(IndexError, match=says + r" \(indices must lie in \[0, 4\)\)") as e:
            f(g, idx, 4)
        messages.add(str(e.value))
    assert len(messages) == 1
    reference = checked_reference(pooling.plane_scatter_add)
    with pytest.raises(ValueError, match=r"g and idx must be 2-D arrays \(planes, values\) of one shape"):
        reference(g, idx.T[:1], 4)
    with pytest.raises(TypeError, match="idx has dtype float64, but must hold integers"):
        reference(g, idx.astype(float), 4)
    with pytest.raises(ValueError, match="must be non-negative"):
        reference(g, idx, -1)


def test_plane_gather_refuses_an_index_outside_the_plane():
    "A gather at -1 would read the plane's last element (NumPy's negative indexing); it raises instead."
    x = mytorch.tensor(np.arange(8.0).reshape(2, 4))
    with pytest.raises(IndexError, match=r"PlaneGather: idx\[1, 0\] = -1 is out of range for planes of size 4"):
        pooling.PlaneGather.apply(x, np.array([[0], [-1]]), 1)
    assert pooling.PlaneGather.apply(x, np.array([[3], [0]]), 1).tolist() == [[3.0], [4.0]]


# -- the layer runs the same numbers either way ------------------------------------------------

@pytest.fixture
def pool_references(monkeypatch):
    "Make mytorch.nn.pooling call the NumPy references of the max pool and the scatter-add."
    for name in ("max_pool_with_indices", "plane_scatter_add"):
        ref = getattr(pooling, name).reference
        monkeypatch.setattr(pooling, name, ref)
        ref.reference = ref                      # `_kernel` asks other dtypes for `.reference`


def pool_numbers(x, kwargs, nd):
    xt = mytorch.tensor(x, requires_grad=True)
    y, idx = (max_pool2d if nd == 2 else max_pool1d)(xt, **kwargs, return_indices=True)
    (y * mytorch.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape).astype(x.dtype))).sum().backward()
    return [y.detach().numpy(), idx.numpy(), xt.grad.numpy()]


POOL_LAYER_CASES = [((4, 3, 9, 8), dict(kernel_size=3, stride=1, padding=1), 2),         # overlapping windows
                    ((2, 2, 7, 7), dict(kernel_size=2, stride=2, ceil_mode=True), 2),
                    ((3, 5, 9), dict(kernel_size=3, stride=2, padding=1, dilation=2), 1),
                    ((6, 8, 8), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1)), 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(POOL_LAYER_CASES)))
def test_max_pool_layers_give_the_same_numbers_with_the_references(case, dtype, request):
    twin(pooling.max_pool_with_indices), twin(pooling.plane_scatter_add)
    shape, kwargs, nd = POOL_LAYER_CASES[case]
    x = np.random.default_rng(9).integers(-3, 4, shape).astype(dtype)   # ties everywhere
    with_kernels = pool_numbers(x, kwargs, nd)
    request.getfixturevalue("pool_references")
    with_references = pool_numbers(x, kwargs, nd)
    for got, want in zip(with_kernels, with_references):
        np.testing.assert_array_equal(got, want)


def test_integer_maps_use_the_reference():
    y, idx = max_pool2d(mytorch.tensor(np.arange(16).reshape(1, 4, 4)), 2, return_indices=True)
    assert y.tolist() == [[[5, 7], [13, 15]]] and idx.tolist() == [[[5, 7], [13, 15]]]


# -- choosing an implementation ----------------------------------------------------------------

def run_python(code, env_extra=None):
    "Run `code` in a fresh interpreter that imports this checkout's mytorch; return the CompletedProcess."
    env = {k: v for k, v in os.environ.items() if k != "MYTORCH_KERNELS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


PROBE = """
import numpy as np
import mytorch, mytorch.kernels as k, mytorch.nn.conv as c, mytorch.nn.pooling as p
for f in (c.im2col, c.col2im, p.max_pool_with_indices, p.plane_scatter_add):
    print(f.__name__, '|', k.kernel_backend(f.__name__), '|', 'reference' if f.impl is f.reference else
          'compiled' if f.impl is f.compiled else 'other', f.backend)
x = mytorch.tensor(np.arange(32.0).reshape(1, 2, 4, 4), requires_grad=True)
y = p.max_pool2d(c.conv2d(x, mytorch.ones(2, 2, 3, 3, dtype=mytorch.float64), padding=1), 2)
y.sum().backward()
print(y.detach().numpy().ravel().tolist(), x.grad.numpy().sum())
"""


def probe_lines(env=None, block=None):
    r = run_python(("import sys; sys.modules[%r] = None\n" % block if block else "") + PROBE, env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    return [tuple(s.strip() for s in line.split("|")) for line in lines[:4]], lines[4]


def test_env_numpy_makes_the_decorated_functions_run_their_references():
    kernels, numbers = probe_lines({"MYTORCH_KERNELS": "numpy"})
    assert kernels == [(name, "numpy (MYTORCH_KERNELS=numpy)", "reference numpy") for name in NAMES]
    assert numbers == probe_lines()[1]            # and the same numbers as by default


def test_default_runs_the_measured_defaults():
    for f in (conv.im2col, conv.col2im, pooling.max_pool_with_indices, pooling.plane_scatter_add):
        twin(f)
    kernels, _ = probe_lines()
    assert kernels == [(name, "cython" if K._registry[name].default else
                        "numpy (off by default: it does not clearly beat NumPy in benchmarks/kernels.py)",
                        "compiled cython" if K._registry[name].default else "reference numpy") for name in NAMES]


@pytest.mark.parametrize("block, names", [("mytorch._conv", NAMES[:2]), ("mytorch._pooling", NAMES[2:])])
def test_without_an_extension_the_references_run(block, names):
    kernels, numbers = probe_lines(block=block)
    for name, backend, impl in kernels:
        if name in names:
            assert backend.startswith(f"numpy (extension not built: ") and block in backend and impl == "reference numpy"
    reference_numbers = probe_lines({"MYTORCH_KERNELS": "numpy"})[1]
    assert numbers == reference_numbers


def test_this_process_matches_its_environment():
    "The pytest process itself: under `MYTORCH_KERNELS=numpy` every decorated function runs its reference."
    mode = os.environ.get("MYTORCH_KERNELS", "").strip().lower() or "auto"
    for f in (conv.im2col, conv.col2im, pooling.max_pool_with_indices, pooling.plane_scatter_add):
        k = K._registry[f.__name__]
        on = f.compiled is not None and (mode == "cython" or (mode == "auto" and k.default))
        assert running(f) is (f.compiled if on else f.reference)
        assert K.kernel_backend(f.__name__) == ("cython" if on else f"numpy ({k.why})")


def test_kernel_functions_keep_the_references_names_and_docs():
    for f in (conv.im2col, conv.col2im, pooling.max_pool_with_indices, pooling.plane_scatter_add):
        assert f.__name__ == f.reference.__name__ and f.__doc__ == f.reference.__doc__
        assert f.__wrapped__ is f.reference
    assert "max_pool_with_indices" not in pooling.__all__ and "plane_scatter_add" not in pooling.__all__


def test_kernels_benchmark_times_every_registered_kernel():
    "benchmarks/kernels.py imports the modules that register kernels and prints a row for each (here, this file's four)."
    for f in (conv.im2col, conv.col2im, pooling.max_pool_with_indices, pooling.plane_scatter_add):
        twin(f)
    env = {k: v for k, v in os.environ.items() if k != "MYTORCH_KERNELS"}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernels.py"), "--sizes", "100", "--repeat", "1",
                        "--budget", "0.0002"], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.endswith((" win", " loss"))]
    for name in NAMES:
        assert sorted(row[1] for row in rows if row[0] == name) == ["float32", "float64"], name
        assert any(line.strip().startswith(f"{name}: ") and f"default={K._registry[name].default}" in line
                   for line in r.stdout.splitlines())
    unknown = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernels.py"), "--kernels", "no_such_kernel"],
                             capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert unknown.returncode == 1 and "No compiled kernel to time named no_such_kernel" in unknown.stdout


def test_raw_compiled_kernels_refuse_what_would_read_or_write_out_of_bounds():
    """The contract is checked in Python, before either implementation; a compiled twin called directly, without
    the check, keeps only the guards that stand between a bad argument and memory outside an array."""
    for f in (conv.im2col, conv.col2im, pooling.max_pool_with_indices, pooling.plane_scatter_add):
        twin(f)
    geom = CONV_GEOMETRIES["3x3 same"]
    with pytest.raises(ValueError, match="stride or dilation below 1"):        # the loops divide by the strides
        conv.im2col.compiled(np.zeros((1, 1) + geom.in_size), geom._replace(stride=(0, 1)))
    with pytest.raises(ValueError, match="stride or dilation below 1"):
        conv.col2im.compiled(np.zeros((1, 1) + geom.kernel + geom.out_size), geom._replace(dilation=(1, 0)))
    geo = pooling._geometry(mytorch.zeros(1, 4, 4), 2, "test", 2, None, 0)
    with pytest.raises(ValueError, match="fewer than 2 dims"):                 # 1-D would be read as an n x n plane
        pooling.max_pool_with_indices.compiled(np.zeros(4), geo)
    with pytest.raises(ValueError, match="stride or dilation below 1"):
        pooling.max_pool_with_indices.compiled(np.zeros((1, 4, 4)), geo._replace(stride=(0, 2)))
    g = np.ones((2, 3))
    with pytest.raises(IndexError, match="out of range"):                      # an index past its plane
        pooling.plane_scatter_add.compiled(g, np.array([[0, 1, 2], [2, 4, 0]]), 4)
    with pytest.raises(IndexError, match="out of range"):
        pooling.plane_scatter_add.compiled(g, -np.ones((2, 3), np.int64), 4)
    with pytest.raises(ValueError, match="differ in shape"):                  # idx read with g's shape
        pooling.plane_scatter_add.compiled(g, np.zeros((2, 2), np.int64), 4)
    with pytest.raises(ValueError, match="buffer dtype"):                     # Cython's typed memoryviews: the dtype
        conv.col2im.compiled(np.zeros((1, 1) + geom.kernel + geom.out_size, np.float16), geom)
