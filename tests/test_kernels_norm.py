"""The compiled batch-norm kernels (kernels/normalization.pyx) against their NumPy references (nbs/27_normalization.ipynb).

`channel_moments`, `channel_normalize` and `channel_norm_backward` in `mytorch.nn.normalization`
are marked with `@compiled_kernel`: `f.reference` is the NumPy function as the chapter wrote it,
`f.compiled` the compiled twin (None when the extension is not built), and `f.check` the contract both run
after. The twins add in another
order (row by row, four partial sums, merged by Chan's formula) and compute elementwise in
float64, so they agree with the references to rounding, not bit for bit: the tests compare with
`assert_close`'s tolerance (chapter 02), from the dtype, the number of terms in each result and
their size without cancellation (`budget` below). Tests of a compiled twin skip, with the reason,
when it is not built; when the `CI` environment variable is set they fail instead.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import checked_reference, compiled_twin as twin, running

import mytorch
import mytorch.kernels as K
import mytorch.nn.normalization as norm
from mytorch.engine import grad
from mytorch.gradient_check import assert_close

ROOT = Path(__file__).resolve().parents[1]
DTYPES = [np.float32, np.float64]
KERNELS = (norm.channel_moments, norm.channel_normalize, norm.channel_norm_backward)
NAMES = tuple(f.__name__ for f in KERNELS)
SHAPES = [(4, 3, 10), (1, 2, 7), (5, 4, 1), (3, 1, 33), (2, 5, 3)]   # (A, C, B), incl. B = 1 (BatchNorm1d on (N, C))


def layouts(a):
    "(name, array) pairs: the same numbers in the memory layouts a caller may pass."
    return [("contiguous", a),
            ("fortran", np.asfortranarray(a)),
            ("reversed batch", np.ascontiguousarray(a[::-1])[::-1]),
            ("sliced", np.repeat(a, 2, axis=2)[:, :, ::2]),
            ("transposed", np.ascontiguousarray(a.swapaxes(0, 2)).swapaxes(0, 2))]


def close(got, want, dtype, budget, err_msg=""):
    "Same dtype and shape, and equal up to rounding: `budget` is assert_close's (n, scale) for these numbers."
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape, (got.dtype, got.shape, want.shape, err_msg)
    n, scale = budget
    assert_close(got, want, dtype=dtype, n=n, scale=scale, what=err_msg or "result")


def budget(x, g=None, mean=None, inv_std=None, w=None, b=None):
    """assert_close's (n, scale) for each output of channel_moments(x) (g None), channel_normalize(x, mean, inv_std, w,
    b) (g None, mean given) or channel_norm_backward(g, x, mean, inv_std, w): the terms added into each number and
    their size without cancellation, |x - mean| <= |x| + |mean| (per channel; M = A * B positions)."""
    per = lambda v: np.asarray(v, np.float64).reshape(1, -1, 1)
    x = x.astype(np.float64)
    M = max(1, x.shape[0] * x.shape[2])
    if mean is None:   # moments: var = mean(x**2) - mean**2 has terms of size x**2
        return [(M, np.abs(x).mean((0, 2))), (M + 2, (x * x).mean((0, 2)))]
    k = per(inv_std) * (1.0 if w is None else np.abs(per(w)))
    xhat = (np.abs(x) + np.abs(per(mean))) * per(inv_std)
    if g is None:      # y = (x - mean) * (inv_std * w) + b
        return (4, (np.abs(x) + np.abs(per(mean))) * k + (0.0 if b is None else np.abs(per(b))))
    g = np.abs(g.astype(np.float64))
    sum_g, sum_gxhat = g.sum((0, 2)), (g * xhat).sum((0, 2))
    dx = k * (g + per(sum_g) / M + xhat * per(sum_gxhat) / M)   # inv_std * w * (g - mean(g) - xhat * mean(g * xhat))
    return [(M + 6, dx), (M, sum_g), (M + 3, sum_gxhat)]


def inputs(shape, dtype, seed=0, offset=3.0):
    "x (offset from zero, so that centring matters), g, and per-channel mean, inv_std, weight, bias."
    rng = np.random.default_rng(seed)
    C = shape[1]
    x = (offset + rng.standard_normal(shape)).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    mean, var = norm.channel_moments.reference(x)
    inv_std = (1 / np.sqrt(var + 1e-5)).astype(dtype)
    w, b = rng.standard_normal(C).astype(dtype), rng.standard_normal(C).astype(dtype)
    return x, g, mean, inv_std, w, b


# -- equivalence ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_moments_match_reference(shape, dtype):
    compiled = twin(norm.channel_moments)
    x = inputs(shape, dtype)[0]
    want = norm.channel_moments.reference(x)
    for layout, view in layouts(x):
        got = compiled(view)
        for g, w, bud in zip(got, want, budget(x)): close(g, w, dtype, bud, layout)


def test_moments_are_stable_for_a_large_mean():
    "Mean 1e4, spread 1e-2: the centred (two-pass / Chan) variance keeps its digits, as the reference's does."
    compiled = twin(norm.channel_moments)
    x = 1e4 + 1e-2 * np.random.default_rng(1).standard_normal((16, 3, 50))
    exact = x.var((0, 2))
    _, var = compiled(x)
    np.testing.assert_allclose(var, exact, rtol=1e-9)
    x32 = x.astype(np.float32)                  # float32 data, accumulated in float64, rounded once to float32:
    var64 = x32.astype(np.float64).var((0, 2))  # the float64 sums' own error (~1e-8 of var here) is far below that rounding
    assert_close(compiled(x32)[1], var64, dtype=np.float32, n=1, scale=var64, what="float32 variance")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("affine", ["weight and bias", "weight only", "neither"])
def test_normalize_matches_reference(shape, dtype, affine):
    compiled = twin(norm.channel_normalize)
    x, _, mean, inv_std, w, b = inputs(shape, dtype, seed=2)
    w = None if affine == "neither" else w
    b = b if affine == "weight and bias" else None
    want = norm.channel_normalize.reference(x, mean, inv_std, w, b)
    for layout, view in layouts(x):
        got = compiled(view, mean, inv_std, w, b)
        assert got.flags.c_contiguous
        close(got, want, dtype, budget(x, None, mean, inv_std, w, b), layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_backward_matches_reference(shape, dtype, with_weight):
    compiled = twin(norm.channel_norm_backward)
    x, g, mean, inv_std, w, _ = inputs(shape, dtype, seed=3)
    w = w if with_weight else None
    want = norm.channel_norm_backward.reference(g, x, mean, inv_std, w)
    for (layout, xv), (_, gv) in zip(layouts(x), layouts(g)):
        got = compiled(gv, xv, mean, inv_std, w)
        buds = budget(x, g, mean, inv_std, w)
        for a, b, bud in zip(got, want, buds): close(a, b, dtype, bud, layout)
        got = compiled(g, xv, mean, inv_std, w)            # only one of the two non-contiguous
        for a, b, bud in zip(got, want, buds): close(a, b, dtype, bud, layout)


def test_backward_is_the_batch_norm_gradient():
    "The reference (and so the twin) against finite differences of the batch-norm forward, float64."
    x, g, _, _, w, b = inputs((3, 2, 4), np.float64, seed=4)
    def loss(x, w, b):
        mean, var = norm.channel_moments.reference(x)
        return float((norm.channel_normalize.reference(x, mean, 1 / np.sqrt(var + 1e-5), w, b) * g).sum())
    mean, var = norm.channel_moments.reference(x)
    for f in (norm.channel_norm_backward.reference, norm.channel_norm_backward.compiled):
        if f is None: continue
        dx, db, dw = f(g, x, mean, 1 / np.sqrt(var + 1e-5), w)
        for arr, got in ((x, dx), (w, dw), (b, db)):
            num = np.zeros_like(arr)
            for i in np.ndindex(arr.shape):
                keep = arr[i]
                arr[i] = keep + 1e-6
                up = loss(x, w, b)
                arr[i] = keep - 1e-6
                down = loss(x, w, b)
                arr[i] = keep
                num[i] = (up - down) / 2e-6
            np.testing.assert_allclose(got, num, atol=1e-7)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_inputs(dtype):
    "No positions (A = 0): an empty output and zero sums; no channels (C = 0): empty everything."
    for f in (norm.channel_normalize, norm.channel_norm_backward):
        twin(f)
    x = np.zeros((0, 3, 4), dtype)
    ones = np.ones(3, dtype)
    assert norm.channel_normalize.compiled(x, ones, ones, None, None).shape == (0, 3, 4)
    dx, sg, sgx = norm.channel_norm_backward.compiled(x, x, ones, ones, ones)
    assert dx.shape == (0, 3, 4) and sg.tolist() == [0, 0, 0] and sgx.tolist() == [0, 0, 0] and sg.dtype == dtype
    m, v = twin(norm.channel_moments)(np.zeros((2, 0, 4), dtype))
    assert m.shape == v.shape == (0,) and m.dtype == dtype


def test_inputs_are_left_alone():
    x, g, mean, inv_std, w, b = inputs((3, 2, 5), np.float64, seed=5)
    saved = [a.copy() for a in (x, g, mean, inv_std, w, b)]
    twin(norm.channel_moments)(x)
    norm.channel_normalize.compiled(x, mean, inv_std, w, b)
    norm.channel_norm_backward.compiled(g, x, mean, inv_std, w)
    for a, s in zip((x, g, mean, inv_std, w, b), saved):
        np.testing.assert_array_equal(a, s)


# -- contract ------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["reference", "compiled"])
def test_errors_name_the_kernel_the_input_and_the_fix(which):
    "The check runs before either implementation: each refuses the same arguments with the same message."
    side = checked_reference if which == "reference" else twin
    x, g, mean, inv_std, w, b = inputs((2, 3, 4), np.float64)
    with pytest.raises(TypeError, match=r"channel_moments: x has dtype int64.*astype\(np.float64\).*reference"):
        side(norm.channel_moments)(np.zeros((2, 3, 4), np.int64))
    with pytest.raises(ValueError, match=r"channel_normalize: x must be 3-D \(A, C, B\).*got shape \(2, 3, 4, 1\)"):
        side(norm.channel_normalize)(x[..., None], mean, inv_std, w, b)
    with pytest.raises(ValueError, match=r"channel_normalize: weight must hold one float per channel \(3\), got an array of shape \(4,\)"):
        side(norm.channel_normalize)(x, mean, inv_std, np.ones(4), b)
    with pytest.raises(ValueError, match=r"channel_norm_backward: mean must hold one float per channel \(3\), got None"):
        side(norm.channel_norm_backward)(g, x, None, inv_std, w)
    with pytest.raises(ValueError, match=r"channel_norm_backward: g must have x's shape and dtype \(2, 3, 4\), float64; got \(2, 3, 5\)"):
        side(norm.channel_norm_backward)(np.zeros((2, 3, 5)), x, mean, inv_std, w)
    with pytest.raises(ValueError, match=r"g must have x's shape and dtype .* float32"):
        side(norm.channel_norm_backward)(g.astype(np.float32), x, mean, inv_std, w)


# -- the layer on both paths ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (3, 2, 4, 5)])
def test_batch_norm_plain_backward_agrees_with_the_recorded_one(shape, dtype):
    "An ordinary backward (channel kernel) against create_graph's Tensor-op backward, for BatchNorm1d/2d layouts."
    rng = np.random.default_rng(6)
    C = shape[1]
    x = mytorch.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    w = mytorch.tensor(rng.standard_normal(C).astype(dtype), requires_grad=True)
    b = mytorch.tensor(rng.standard_normal(C).astype(dtype), requires_grad=True)
    up = mytorch.tensor(rng.standard_normal(shape).astype(dtype))
    f = lambda: norm.batch_norm(x, None, None, w, b, training=True)
    plain = grad(f(), (x, w, b), up)
    recorded = grad(f(), (x, w, b), up, create_graph=True)
    layout = (shape[0], C, int(np.prod(shape[2:])))                # (A, C, B), as the kernels see it
    xs = x.detach().numpy().reshape(layout)
    mean, var = xs.astype(np.float64).mean((0, 2)), xs.astype(np.float64).var((0, 2))
    (n_dx, s_dx), (n_b, s_b), (n_w, s_w) = budget(xs, up.numpy().reshape(layout), mean, 1 / np.sqrt(var + 1e-5),
                                                  w.detach().numpy())
    n_stats = 2 * layout[0] * layout[2]   # both paths also compute the batch's mean and variance
    for p, r, n, scale in zip(plain, recorded, (n_dx, n_w, n_b), (s_dx.reshape(shape), s_w, s_b)):
        assert p.dtype == r.dtype and p.shape == r.shape
        assert_close(p, r, dtype=np.dtype(dtype), n=n + n_stats, scale=scale)


def test_batch_norm_output_and_gradients_do_not_depend_on_the_backend(monkeypatch):
    "The same forward and backward with the compiled kernels and with the references (float64)."
    for f in KERNELS:
        twin(f)
    rng = np.random.default_rng(7)
    xd, up = rng.standard_normal((5, 3, 4, 4)) + 2, rng.standard_normal((5, 3, 4, 4))
    results = {}
    for backend in ("cython", "numpy"):
        with monkeypatch.context() as m:
            for f in KERNELS:           # point the layer at one implementation, behind the kernel's check
                m.setattr(norm, f.__name__, K._registry[f.__name__].checked(backend))
            bn = mytorch.nn.BatchNorm2d(3, dtype=mytorch.float64)
            x = mytorch.tensor(xd, requires_grad=True)
            y = bn(x)
            y.backward(mytorch.tensor(up))
            results[backend] = [y.detach().numpy(), x.grad.numpy(), bn.weight.grad.numpy(), bn.bias.grad.numpy(),
                                bn.running_mean.numpy(), bn.running_var.numpy()]
    for a, b in zip(results["cython"], results["numpy"]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13 * max(1.0, np.abs(b).max()))


# -- dispatch ------------------------------------------------------------------------------

PROBE = """
import numpy as np
import mytorch, mytorch.kernels as k, mytorch.nn.normalization as n
for f in (n.channel_moments, n.channel_normalize, n.channel_norm_backward):
    print(f.__name__, '|', k.kernel_backend(f.__name__), '|', 'reference' if f.impl is f.reference else
          'compiled' if f.impl is f.compiled else 'other', f.backend)
bn = mytorch.nn.BatchNorm2d(2, dtype=mytorch.float64)
x = mytorch.tensor(np.arange(48.0).reshape(3, 2, 2, 4) ** 1.5, requires_grad=True)
(bn(x) * mytorch.tensor(np.linspace(-1, 1, 48).reshape(3, 2, 2, 4))).sum().backward()
print(np.round(x.grad.numpy(), 9).ravel().tolist())
"""


def probe_lines(env_extra=None, block=None):
    env = {k: v for k, v in os.environ.items() if k != "MYTORCH_KERNELS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    code = ("import sys; sys.modules[%r] = None\n" % block if block else "") + PROBE
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    return [tuple(s.strip() for s in line.split("|")) for line in lines[:3]], lines[3]


def test_env_numpy_runs_the_references_with_the_same_numbers():
    kernels, numbers = probe_lines({"MYTORCH_KERNELS": "numpy"})
    assert kernels == [(name, "numpy (MYTORCH_KERNELS=numpy)", "reference numpy") for name in NAMES]
    assert numbers == probe_lines()[1]


def test_default_runs_the_measured_defaults():
    for f in KERNELS:
        twin(f)
    kernels, _ = probe_lines()
    assert kernels == [(name, "cython" if K._registry[name].default else
                        "numpy (off by default: it does not clearly beat NumPy in benchmarks/kernels.py)",
                        "compiled cython" if K._registry[name].default else "reference numpy") for name in NAMES]


def test_without_the_extension_the_references_run():
    kernels, numbers = probe_lines(block="mytorch._normalization")
    for name, backend, impl in kernels:
        assert backend.startswith("numpy (extension not built: ") and "mytorch._normalization" in backend
        assert impl == "reference numpy"
    assert numbers == probe_lines({"MYTORCH_KERNELS": "numpy"})[1]


def test_this_process_matches_its_environment():
    mode = os.environ.get("MYTORCH_KERNELS", "").strip().lower() or "auto"
    for f in KERNELS:
        k = K._registry[f.__name__]
        on = f.compiled is not None and (mode == "cython" or (mode == "auto" and k.default))
        assert running(f) is (f.compiled if on else f.reference)


def test_kernel_functions_keep_the_references_names_and_docs_and_stay_private():
    for f in KERNELS:
        assert f.__name__ == f.reference.__name__ and f.__doc__ == f.reference.__doc__ and f.__wrapped__ is f.reference
        assert f.__name__ not in norm.__all__
        assert K._registry[f.__name__].bench is not None and K._registry[f.__name__].extension == "normalization"


def test_float16_uses_the_references():
    "The compiled twins take float32 and float64; a float16 batch norm runs the references and stays float16."
    rng = np.random.default_rng(8)
    # float16 numbers, so that float64 computes with exactly the data float16 does
    xd, up = (rng.standard_normal((6, 3, 5)).astype(np.float16).astype(np.float64) for _ in range(2))
    grads = {}
    for dt in (mytorch.float16, mytorch.float64):
        bn = mytorch.nn.BatchNorm1d(3, dtype=dt)
        x = mytorch.tensor(xd, dtype=dt, requires_grad=True)
        y = bn(x)
        y.backward(mytorch.tensor(up, dtype=dt))
        assert y.dtype == x.grad.dtype == bn.weight.grad.dtype == dt
        grads[dt] = [a.numpy().astype(np.float64) for a in (y.detach(), x.grad, bn.weight.grad, bn.bias.grad)]
    mean, var = xd.mean((0, 2)), xd.var((0, 2))
    inv_std, ones = 1 / np.sqrt(var + 1e-5), np.ones(3)
    (n_dx, s_dx), (n_b, s_b), (n_w, s_w) = budget(xd, up, mean, inv_std, ones)
    budgets = [budget(xd, None, mean, inv_std, ones, np.zeros(3)), (n_dx, s_dx), (n_w, s_w), (n_b, s_b)]
    n_stats = 2 * 6 * 5   # the batch's mean and variance
    names = ("y", "x.grad", "weight.grad", "bias.grad")
    for a, b, (n, scale), what in zip(grads[mytorch.float16], grads[mytorch.float64], budgets, names):
        assert_close(a, b, dtype=np.float16, n=n + n_stats, scale=scale, what=f"float16 {what}")
