# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: extra_compile_args = -ffp-contract=off
"""Fused elementwise kernels: one pass over memory where NumPy makes several.

`setup.py` compiles this file into `mytorch._fused`; `mytorch.kernels` (the chapter
nbs/40_kernels.ipynb) is its only caller. Every kernel takes C-contiguous 1-D float32 or
float64 arrays of a single dtype. The dispatcher in `mytorch.kernels` checks dtypes and
shapes, copies non-contiguous inputs and flattens N-D ones before calling here, so these
loops can run without the GIL, bounds checks or negative-index wrapping. Each kernel has a
NumPy reference of the same name in `mytorch.kernels.numpy_kernels`: it defines what the
kernel must compute, and the tests hold the two together.

`-ffp-contract=off` (the `distutils:` line above; Cython adds it to setup.py's compiler
flags) keeps `a*b + c` two roundings, as in NumPy; see `_fma`.

Each loop is written once over Cython's fused type `floating` and compiled twice, for
`float` and `double`. The Python-visible functions pick the specialisation from the dtype
themselves: Cython's automatic dispatch for a `def` taking fused memoryviews costs about a
microsecond per call, as much as NumPy needs for a whole 100-element operation.
"""
from cython cimport floating
import numpy as np


cdef double _sum_of_squares(const floating[::1] x) noexcept:
    cdef Py_ssize_t i, n = x.shape[0], n8 = n - n % 8
    # Eight independent partial sums. With one accumulator every add waits for the one
    # before it (a dependency chain of ~4 cycles per element), and C may not reorder
    # floating-point additions on its own; eight lanes let the adds overlap and let the
    # compiler keep them in SIMD registers.
    cdef double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0
    cdef double v
    with nogil:
        for i in range(0, n8, 8):
            s0 += <double>x[i] * <double>x[i]
            s1 += <double>x[i + 1] * <double>x[i + 1]
            s2 += <double>x[i + 2] * <double>x[i + 2]
            s3 += <double>x[i + 3] * <double>x[i + 3]
            s4 += <double>x[i + 4] * <double>x[i + 4]
            s5 += <double>x[i + 5] * <double>x[i + 5]
            s6 += <double>x[i + 6] * <double>x[i + 6]
            s7 += <double>x[i + 7] * <double>x[i + 7]
        for i in range(n8, n):
            v = <double>x[i]
            s0 += v * v
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


def sum_of_squares(x):
    "sum(x**2) of a contiguous 1-D float32/float64 array as a Python float, accumulated in double."
    cdef double s
    if x.dtype.char == 'f':
        s = _sum_of_squares[float](x)
    else:
        s = _sum_of_squares[double](x)  # anything but float64 fails here: "Buffer dtype mismatch"
    return s


cdef void _fma(const floating[::1] a, const floating[::1] b, const floating[::1] c,
               floating[::1] out) noexcept:
    cdef Py_ssize_t i
    # Each product is rounded to the dtype before the add, as in NumPy's a * b + c, so the
    # two agree bit for bit. That is what -ffp-contract=off at the top of this file is for:
    # without it GCC and Clang may contract this line into one FMA instruction wherever the
    # target has one (always on ARM64; on x86-64 with -march=native), which rounds once.
    # (C's fma() rounds once too, and where there is no FMA instruction it is emulated in
    # software, many times slower.)
    with nogil:
        for i in range(out.shape[0]):
            out[i] = a[i] * b[i] + c[i]


def fma(a, b, c):
    "A new array a*b + c from three contiguous 1-D float32/float64 arrays of one dtype and length."
    n = a.shape[0]
    if b.shape[0] != n or c.shape[0] != n:
        raise ValueError(f"fma: lengths differ: a {n}, b {b.shape[0]}, c {c.shape[0]}; "
                         "call mytorch.kernels.fma, which checks shapes, rather than mytorch._fused")
    out = np.empty(n, dtype=a.dtype)
    if a.dtype.char == 'f':
        _fma[float](a, b, c, out)
    else:
        _fma[double](a, b, c, out)
    return out
