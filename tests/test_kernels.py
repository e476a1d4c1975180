"""The Cython kernels of the kernels chapter (kernels/kernels.pyx) against their NumPy references (nbs/91_kernels.ipynb),
and the registry every kernel is entered in (`compiled_kernel`).

Tests that need the compiled extension skip, with the reason, when it is not built; when the
`CI` environment variable is set they fail instead, because `make test` builds the extension
and a missing one there is a broken build, not a machine without a compiler.
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import mytorch.kernels as K

ROOT = Path(__file__).resolve().parents[1]
DTYPES = [np.float32, np.float64]


def require_extension():
    "Skip (or, under CI, fail) when the Cython extension did not import."
    if K._registry["sum_of_squares"].compiled is None:
        why = (f"the Cython kernels are not built ({K._registry['sum_of_squares'].missing}); "
               "build them with `python setup.py build_ext --inplace` (make test does)")
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the compiled kernels must be tested, but {why}")
        pytest.skip(why)


@pytest.fixture
def compiled():
    require_extension()
    return K.cython_kernels


def backends():
    "Both namespaces as pytest params; the compiled one is marked so that it skips/fails without the extension."
    return [pytest.param("numpy", id="numpy"), pytest.param("cython", id="cython")]


def namespace(name):
    if name == "cython":
        require_extension()
        return K.cython_kernels
    return K.numpy_kernels


# -- comparison helpers -----------------------------------------------------------------

def assert_sum_close(got, want):
    "Both accumulate in float64; they may differ only by summation order (every term is >= 0)."
    assert type(got) is float
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert math.isclose(got, want, rel_tol=1e-10, abs_tol=0.0), (got, want)


def assert_fma_close(got, a, b, c):
    """`got` is a*b+c to within rounding: 2 ulp of |a*b| + |c|, which also admits a single-rounding FMA.
    (The kernel is in fact exact; `test_fma_rounds_exactly_as_numpy` holds it to that.)"""
    want = K.numpy_kernels.fma(a, b, c)
    assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    special = ~np.isfinite(want)
    np.testing.assert_array_equal(got[special], want[special])
    fin = ~special
    a64, b64, c64 = (np.asarray(v, np.float64)[fin] for v in np.broadcast_arrays(a, b, c))
    bound = 2 * np.finfo(want.dtype).eps * (np.abs(a64 * b64) + np.abs(c64)) + np.finfo(want.dtype).tiny
    assert np.all(np.abs(got[fin].astype(np.float64) - want[fin].astype(np.float64)) <= bound)


def layouts(rng, dtype):
    "(name, array) pairs covering every memory layout the dispatcher has to handle."
    m = rng.standard_normal((40, 30)).astype(dtype)
    v = rng.standard_normal(1001).astype(dtype)
    ro = m.copy()
    ro.flags.writeable = False
    return {
        "1d": v,
        "2d": m,
        "3d": rng.standard_normal((4, 5, 6)).astype(dtype),
        "transposed": m.T,
        "fortran": np.asfortranarray(m),
        "strided": m[::3, 1::2],
        "step": v[::7],
        "reversed": v[::-1],
        "read-only": ro,
    }


LAYOUTS = ["1d", "2d", "3d", "transposed", "fortran", "strided", "step", "reversed", "read-only"]


# -- compiled against reference ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sum_of_squares_matches_reference(compiled, dtype, layout):
    x = layouts(np.random.default_rng(1), dtype)[layout]
    assert_sum_close(compiled.sum_of_squares(x), K.numpy_kernels.sum_of_squares(x))
    # and both against a float64 computation written independently of either
    assert_sum_close(compiled.sum_of_squares(x), math.fsum(float(v) ** 2 for v in x.ravel()))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fma_matches_reference(compiled, dtype, layout):
    rng = np.random.default_rng(2)
    a = layouts(rng, dtype)[layout]
    b = rng.standard_normal(a.shape).astype(dtype)  # contiguous partners for a non-contiguous a
    c = layouts(rng, dtype)[layout].copy(order="F")  # and a third layout for c
    got = compiled.fma(a, b, c)
    assert_fma_close(got, a, b, c)
    assert not any(np.shares_memory(got, v) for v in (a, b, c))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_fma_rounds_exactly_as_numpy(compiled, dtype):
    """Product rounded, then the sum: bit for bit NumPy's a*b + c. This fails if the compiler contracts
    the loop into FMA instructions (ARM64, or x86-64 with -march=native), which the
    `# distutils: extra_compile_args = -ffp-contract=off` line in kernels/kernels.pyx forbids."""
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(10_000).astype(dtype) for _ in range(3))
    np.testing.assert_array_equal(compiled.fma(a, b, c), a * b + c)


def test_kernels_do_not_mutate_inputs(compiled):
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal((7, 9)) for _ in range(3))
    before = [v.copy() for v in (a, b, c)]
    compiled.fma(a, b, c)
    compiled.sum_of_squares(a)
    for v, w in zip((a, b, c), before):
        np.testing.assert_array_equal(v, w)


# -- edge cases, in both namespaces -------------------------------------------------------

@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0, 2)])
def test_empty(backend, dtype, shape):
    ns = namespace(backend)
    e = np.zeros(shape, dtype)
    assert ns.sum_of_squares(e) == 0.0
    r = ns.fma(e, e, e)
    assert r.shape == shape and r.dtype == dtype


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_zero_dimensional(backend, dtype):
    ns = namespace(backend)
    a, b, c = (np.array(v, dtype) for v in (2.0, 3.0, 1.0))
    assert ns.sum_of_squares(a) == 4.0
    r = ns.fma(a, b, c)
    assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == dtype and r == 7.0
    assert ns.sum_of_squares(3.0) == 9.0  # a Python float is a 0-d float64 array


@pytest.mark.parametrize("backend", backends())
def test_large_values(backend):
    ns = namespace(backend)
    big32 = np.full(1000, 1e20, np.float32)  # each square overflows float32, the sum fits in float64
    assert ns.sum_of_squares(big32) == pytest.approx(1000 * float(np.float32(1e20)) ** 2, rel=1e-12)
    assert math.isfinite(ns.sum_of_squares(np.full(3, np.finfo(np.float32).max, np.float32)))
    with np.errstate(over="ignore"):  # NumPy warns on overflow; the compiled loop does not
        assert ns.sum_of_squares(np.full(3, 1e200)) == math.inf  # float64 squares overflow float64: inf
        r = ns.fma(np.full(3, 1e30, np.float32), np.full(3, 1e30, np.float32), np.ones(3, np.float32))
        assert np.all(r == np.inf)
        big = np.array([1e300, -1e300, 1e300])
        np.testing.assert_array_equal(ns.fma(big, big, big), [np.inf, np.inf, np.inf])


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_nan_and_inf_propagate(backend, dtype):
    ns = namespace(backend)
    x = np.arange(20, dtype=dtype)
    x[13] = np.nan
    assert math.isnan(ns.sum_of_squares(x))
    assert ns.sum_of_squares(np.array([1, np.inf, 2], dtype)) == math.inf
    a = np.array([np.nan, 1, np.inf, 2, np.inf], dtype)
    b = np.array([1, np.nan, 0, 3, 1], dtype)
    c = np.array([1, 1, 1, np.nan, -np.inf], dtype)
    with np.errstate(invalid="ignore"):
        r = ns.fma(a, b, c)
    np.testing.assert_array_equal(np.isnan(r), [True, True, True, True, True])  # inf*0 and inf-inf are NaN too
    r = ns.fma(np.array([np.nan, 2], dtype), np.ones(2, dtype), np.ones(2, dtype))
    assert np.isnan(r[0]) and r[1] == 3  # a NaN stays in its own element


# -- the contract's errors, identical in both namespaces -----------------------------------

@pytest.mark.parametrize("backend", backends())
def test_non_float_input_is_refused(backend):
    ns = namespace(backend)
    f32 = np.ones(4, np.float32)
    with pytest.raises(TypeError, match=r"fma: c has dtype int64, .*float32 or float64.*c\.astype\(np\.float32\)"):
        ns.fma(f32, f32, np.arange(4))
    with pytest.raises(TypeError, match=r"sum_of_squares: x has dtype int64.*x\.astype\(np\.float64\)"):
        ns.sum_of_squares(np.arange(4))
    for bad in (np.ones(4, np.float16), np.ones(4, np.complex128), np.ones(4, bool), np.ones(4, ">f8")):
        with pytest.raises(TypeError, match=f"has dtype {bad.dtype}"):
            ns.sum_of_squares(bad)


@pytest.mark.parametrize("backend", backends())
def test_mixed_dtypes_are_refused(backend):
    ns = namespace(backend)
    a = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"fma: inputs mix dtypes \(a float32, b float64, c float32\); "
                                        r"kernels do not promote.*b\.astype\(np\.float32\)"):
        ns.fma(a, a.astype(np.float64), a)


@pytest.mark.parametrize("backend", backends())
def test_different_shapes_are_refused(backend):
    ns = namespace(backend)
    a = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"fma: shapes differ \(a \(2, 3\), b \(2, 3\), c \(3,\)\); "
                                         r"kernels do not broadcast.*c = np\.broadcast_to\(c, \(2, 3\)\)"):
        ns.fma(a, a, np.ones(3))  # NumPy would broadcast this; the kernel refuses
    with pytest.raises(ValueError, match=r"shapes differ \(a \(6,\), b \(2, 3\), c \(6,\)\)"):
        ns.fma(np.ones(6), a, np.ones(6))  # same size, different shape: still refused


def test_both_namespaces_raise_the_same_message(compiled):
    a = np.ones((2, 3), np.float32)
    for args in [(a, a, np.ones(3, np.float32)), (a, a.astype(np.float64), a), (a, a, a.astype(int))]:
        with pytest.raises((TypeError, ValueError)) as ref:
            K.numpy_kernels.fma(*args)
        with pytest.raises(type(ref.value)) as got:
            compiled.fma(*args)
        assert str(got.value) == str(ref.value)


def test_raw_extension_refuses_what_it_cannot_handle(compiled):
    """mytorch._kernels is called after the check, but called directly it must not read out of bounds: fma keeps its
    comparison of lengths, the typed memoryviews refuse other dtypes, and any layout is flattened, not misread."""
    f = K._load("kernels")[0]
    with pytest.raises(ValueError, match="lengths differ"):
        f.fma(np.ones(3), np.ones(4), np.ones(3))
    assert f.sum_of_squares(np.arange(10.0)[::2]) == sum(v * v for v in range(0, 10, 2))  # strided: copied by ravel
    np.testing.assert_array_equal(f.fma(*[np.ones((3, 4)).T] * 3), np.full((4, 3), 2.0))
    with pytest.raises(ValueError, match="Buffer dtype mismatch"):
        f.sum_of_squares(np.ones(3, np.int64))
    with pytest.raises(ValueError, match="Buffer dtype mismatch"):
        f.fma(np.ones(3), np.ones(3, np.float32), np.ones(3))


def test_compiled_namespace_without_extension_says_how_to_build(monkeypatch):
    monkeypatch.setattr(K._registry["sum_of_squares"], "compiled", None)
    monkeypatch.setattr(K._registry["sum_of_squares"], "missing", "extension not built: test")
    with pytest.raises(RuntimeError, match=r"unavailable \(extension not built: test\).*build_ext --inplace"):
        K.cython_kernels.sum_of_squares(np.ones(3))


# -- dispatch -------------------------------------------------------------------------------

def run_python(code, env_extra=None, drop=("MYTORCH_KERNELS",)):
    "Run `code` in a fresh interpreter that imports this checkout's mytorch; return the CompletedProcess."
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


PROBE = """
import mytorch.kernels as k
print(k.kernel_backend("sum_of_squares"))
print(k.kernel_backend('sum_of_squares'), '|', k.kernel_backend('fma'))
print(k.sum_of_squares.impl is k.sum_of_squares.reference, k.fma.impl is k.fma.reference)
print(k.sum_of_squares([3.0, 4.0]), k.fma([1.0], [2.0], [3.0]))
"""
BLOCK = "import sys; sys.modules['mytorch._kernels'] = None\n"


def test_default_backend_follows_enabled_by_default(compiled):
    r = run_python(PROBE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    uses_ref = [not K.enabled_by_default["sum_of_squares"], not K.enabled_by_default["fma"]]
    assert lines[2] == f"{uses_ref[0]} {uses_ref[1]}"
    assert lines[1].split(" | ")[1] == ("cython" if K.enabled_by_default["fma"] else
                                        "numpy (off by default: it does not clearly beat NumPy in benchmarks/kernels.py)")
    assert lines[3] == "25.0 [5.]"


def test_env_numpy_forces_the_references():
    r = run_python(PROBE, {"MYTORCH_KERNELS": "numpy"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["numpy (MYTORCH_KERNELS=numpy)",
                                     "numpy (MYTORCH_KERNELS=numpy) | numpy (MYTORCH_KERNELS=numpy)",
                                     "True True", "25.0 [5.]"]


def test_env_cython_forces_the_compiled_kernels(compiled):
    r = run_python(PROBE, {"MYTORCH_KERNELS": "cython"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == ["cython", "cython | cython", "False False"]


def test_this_process_matches_its_environment():
    "The pytest process itself: `MYTORCH_KERNELS=numpy pytest` must be running the references."
    mode = os.environ.get("MYTORCH_KERNELS", "").strip().lower() or "auto"
    if mode == "numpy":
        assert K.kernel_backend() == "numpy (MYTORCH_KERNELS=numpy)"
        assert all(getattr(K, name).impl is getattr(K, name).reference for name in K.KERNELS)
    elif K._registry["sum_of_squares"].compiled is None:
        assert K.kernel_backend("fma") == f"numpy ({K._registry['fma'].missing})"
    else:
        for name in K.KERNELS:
            on = mode == "cython" or K.enabled_by_default[name]
            f = getattr(K, name)
            assert (f.impl, f.backend) == ((f.compiled, "cython") if on else (f.reference, "numpy"))


def test_imports_and_computes_without_the_extension():
    r = run_python(BLOCK + PROBE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("numpy (extension not built: ") and "mytorch._kernels" in lines[0]
    assert lines[2:] == ["True True", "25.0 [5.]"]


def test_forcing_cython_without_the_extension_is_an_import_error():
    r = run_python(BLOCK + "import mytorch.kernels", {"MYTORCH_KERNELS": "cython"})
    assert r.returncode != 0
    assert "ImportError: MYTORCH_KERNELS=cython, but the Cython kernels are unavailable" in r.stderr
    assert "build_ext --inplace" in r.stderr


def test_unknown_env_value_is_refused():
    r = run_python("import mytorch.kernels", {"MYTORCH_KERNELS": "numy"})
    assert r.returncode != 0
    assert "MYTORCH_KERNELS='numy' is not one of 'auto', 'numpy', 'cython'" in r.stderr


def test_stale_extension_falls_back_with_the_reason():
    code = ("import sys, types; m = types.ModuleType('mytorch._kernels'); m.sum_of_squares = len\n"
            "sys.modules['mytorch._kernels'] = m\nimport mytorch.kernels as k; print(k.kernel_backend('fma'))")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("numpy (mytorch._kernels has no fma: if kernels/kernels.pyx defines it, the build is "
                                "stale; rebuild it)")


def test_import_mytorch_loads_the_kernels_the_core_uses():
    "`import mytorch` loads the NumPy core eagerly, and the core's ops (index_add_rows) run through compiled_kernel."
    code = ("import sys, mytorch; print('mytorch.kernels' in sys.modules, mytorch.indexing.index_add_rows.backend in "
            "('numpy', 'cython'), mytorch.kernels.__name__)")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True True mytorch.kernels"]


def test_kernel_backend_names_unknown_kernels():
    with pytest.raises(ValueError, match="No kernel named 'fmaa'; the kernels are sum_of_squares, fma"):
        K.kernel_backend("fmaa")


def test_every_kernel_is_in_every_namespace():
    for name in K.KERNELS:
        assert callable(getattr(K.numpy_kernels, name)) and callable(getattr(K.cython_kernels, name))
        assert name in K.enabled_by_default and callable(getattr(K, name))
        if K._load("kernels")[0] is not None:
            assert callable(getattr(K._load("kernels")[0], name))


# -- property-based: random shapes, dtypes and layouts ------------------------------------------

@st.composite
def float_arrays(draw, count):
    "`count` arrays of one random dtype and shape, each in a random layout, with finite values."
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=9))
    width = 32 if dtype == np.float32 else 64
    elements = st.floats(-1e6, 1e6, allow_nan=False, width=width)
    out = []
    for _ in range(count):
        layout = draw(st.sampled_from(["c", "transposed", "reversed", "strided"]))
        if layout == "transposed":
            x = draw(hnp.arrays(dtype, shape[::-1], elements=elements)).T
        elif layout == "reversed" and len(shape):
            x = draw(hnp.arrays(dtype, shape, elements=elements))[::-1]
        elif layout == "strided" and len(shape):
            x = draw(hnp.arrays(dtype, (shape[0] * 2,) + shape[1:], elements=elements))[::2]
        else:
            x = draw(hnp.arrays(dtype, shape, elements=elements))
        assert x.shape == shape
        out.append(x)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrays=float_arrays(3))
def test_random_shapes_and_layouts_match_reference(compiled, arrays):
    a, b, c = arrays
    assert_sum_close(compiled.sum_of_squares(a), K.numpy_kernels.sum_of_squares(a))
    assert_fma_close(compiled.fma(a, b, c), a, b, c)


# -- the benchmark helpers (no timing assertions: benchmarks print, tests do not time) --------

def test_benchmark_table_and_defaults_rule():
    rows = [dict(kernel="k1", dtype="float32", size=100, numpy_us=2.0, cython_us=1.0, ratio=2.0, verdict="win"),
            dict(kernel="k1", dtype="float64", size=100, numpy_us=1.0, cython_us=1.0 / 0.6, ratio=0.6, verdict="loss"),
            dict(kernel="k2", dtype="float32", size=10_000, numpy_us=1.0, cython_us=1 / 1.05, ratio=1.05,
                 verdict="win")]
    table = K.benchmark_table(rows).splitlines()
    assert table[0].split() == ["kernel", "dtype", "size", "NumPy", "µs", "Cython", "µs", "ratio", "verdict"]
    assert table[3].split() == ["k2", "float32", "10,000", "1.00", "0.95", "1.05x", "win"]
    assert K.geometric_mean_ratios(rows)["k1"] == pytest.approx(math.sqrt(1.2))
    # sqrt(2 * 0.6) = 1.095 and 1.05: both win on average, neither by the 10% margin
    assert K.measured_defaults(rows) == {"k1": False, "k2": False}
    assert K.measured_defaults(rows, margin=1.0) == {"k1": True, "k2": True}


def test_benchmark_runs(compiled):
    rows = K.benchmark(sizes=(10, 1000), repeat=1, budget=1e-4)
    # this chapter's kernels, then those of later chapters that this test session has imported: one registry
    names = [k for k, v in K._registry.items() if v.bench is not None]
    assert names[:2] == list(K.KERNELS)
    assert [(r["kernel"], r["dtype"], r["size"]) for r in rows] == [
        (k, d, n) for k in names for d in ("float32", "float64") for n in (10, 1000)]
    for r in rows:
        assert r["numpy_us"] > 0 and r["cython_us"] > 0
        assert r["ratio"] == pytest.approx(r["numpy_us"] / r["cython_us"])
        assert r["verdict"] == ("win" if r["ratio"] > 1 else "loss")


def test_benchmark_script_prints_wins_and_losses(compiled):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernels.py"), "--sizes", "100,1000",
                        "--repeat", "1", "--budget", "0.0002"], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "MYTORCH_KERNELS"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "BLAS (build):" in out and "thread" in out
    assert "NumPy µs" in out and "Cython µs" in out and "verdict" in out
    rows = [line for line in out.splitlines() if line.endswith((" win", " loss"))]
    assert sum(line.split()[0] in K.KERNELS for line in rows) == 8  # 2 kernels x 2 dtypes x 2 sizes
    assert len(rows) % 4 == 0 and len(rows) > 8  # and the kernels of the later chapters, as many rows each
    assert "enabled_by_default=" in out


# -- one registry, one check ---------------------------------------------------------------------

def test_this_chapters_kernels_are_in_the_one_registry():
    "sum_of_squares and fma are registered like every later kernel; the old names are views onto the registry."
    for name in K.KERNELS:
        f, k = getattr(K, name), K._registry[name]
        assert (f.reference, f.compiled, f.check) == (k.reference, k.compiled, k.check) and k.extension == "kernels"
        assert f.check is not None and k.bench is not None and K.enabled_by_default[name] == k.default
        assert f.backend == ("numpy" if k.why else "cython") and f.impl is (f.reference if k.why else f.compiled)
        assert f.__name__ == name and f.__wrapped__ is f.reference


@pytest.mark.parametrize("default", [True, False])
def test_the_check_runs_once_before_whichever_implementation_runs(monkeypatch, default):
    "compiled_kernel's wrapper calls `check` once per call, then the chosen implementation on what it returned."
    monkeypatch.setitem(K._extensions, "fake_ext", (types.SimpleNamespace(halve=lambda x, scale=1: ("compiled", x)), None))
    calls = []
    def check(x, scale=1):
        calls.append(x)
        if x < 0: raise ValueError(f"halve: x must be >= 0, got {x}")
        return float(x), scale

    @K.compiled_kernel("halve", extension="fake_ext", default=default, check=check)
    def halve(x, scale=1): return ("reference", x)
    try:
        on = K._kernels_mode() == "cython" or (K._kernels_mode() == "auto" and default)
        assert halve.backend == ("cython" if on else "numpy")
        assert halve(3) == (("compiled" if on else "reference"), 3.0) and calls == [3]   # the check's float, once
        assert halve.impl is (halve.compiled if on else halve.reference)
        with pytest.raises(ValueError, match="x must be >= 0, got -1"):
            halve(-1, scale=2)
        assert calls == [3, -1]
        assert K._registry["halve"].checked("numpy")(4) == ("reference", 4.0)
        assert K._registry["halve"].checked("cython")(4) == ("compiled", 4.0) and calls == [3, -1, 4, 4]
    finally:
        del K._registry["halve"]
