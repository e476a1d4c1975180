# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: extra_compile_args = -ffp-contract=off
"""The kernels chapter's fused elementwise loops: one pass over memory where NumPy makes several.

`setup.py` compiles this file into `mytorch._kernels`, the extension of `mytorch.kernels`
(nbs/91_kernels.ipynb). Each function is the compiled twin of the NumPy reference of the same
name there, and takes the same arguments. The contract (float32 or float64 arrays of one dtype
and one shape) is checked once, in Python, by the kernel's `check`, before whichever of the two
runs, so this file holds the loops and what they need of the layout: each input is flattened
(`ravel`: a view of a C-contiguous array, a contiguous copy of a strided one), so the loops run
without the GIL, bounds checks or negative-index wrapping.

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
    "sum(x**2) of a float32/float64 array of any shape and layout, as a Python float accumulated in double."
    cdef double s
    x = x.ravel()
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
    "A new array a*b + c of the inputs' shape, from float32/float64 arrays of one dtype and one shape."
    shape = a.shape
    a, b, c = a.ravel(), b.ravel(), c.ravel()
    n = a.shape[0]
    if b.shape[0] != n or c.shape[0] != n:  # kept from the contract: the loop would read past the end of b or c
        raise ValueError(f"fma: lengths differ: a {n}, b {b.shape[0]}, c {c.shape[0]}; call mytorch.kernels.fma")
    out = np.empty(n, dtype=a.dtype)
    if a.dtype.char == 'f':
        _fma[float](a, b, c, out)
    else:
        _fma[double](a, b, c, out)
    return out.reshape(shape)
