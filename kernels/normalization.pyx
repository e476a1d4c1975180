# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Batch normalization's per-channel passes for the normalization chapter (nbs/27_normalization.ipynb).

`setup.py` compiles this file into `mytorch._normalization`. The NumPy references are `channel_moments`,
`channel_normalize` and `channel_norm_backward` in `mytorch.nn.normalization`, marked there
with `@compiled_kernel`; these functions take the same arguments and compute the same numbers
up to rounding (a few units in the last place: the order of the additions differs).

Every array is viewed as (A, C, B): A outer positions (the batch), C channels, B inner
positions (the pixels of one channel of one sample), C-contiguous, so one channel of one sample
is a contiguous row of B numbers. What the loops do differently from the references:
- channel_moments reads the input once: each row's mean and centred sum of squares are taken
  while the row is in the L1 cache (two sweeps of B numbers) and merged into the channel's
  running (count, mean, M2) by Chan's formula, all in float64. The reference makes a pass for
  the mean and three for the variance (subtract, square, sum), each over the whole array
  through a non-contiguous reduction.
- channel_normalize writes y = (x - mean) * (inv_std * weight) + bias in one pass; the
  reference makes three (subtract, scale, shift).
- channel_norm_backward reads g and x once for the two per-channel sums, sum(g) and
  sum(g * xhat), and once more to write dx; the reference makes about eight passes.
Elementwise arithmetic is done in float64 and rounded once to the output's dtype.

The contract (float32 or float64 (A, C, B) arrays, per-channel vectors of C numbers) is checked
once, in Python, by each kernel's `check` (`_check_channel_moments` and its siblings in the
chapter), before whichever of the reference and this file's function runs. What is left here is
the loops and the layout they need: non-contiguous inputs are copied with np.ascontiguousarray,
never read through strides, and the per-channel vectors become contiguous float64 (`reshape(C)`
refuses a vector of another size, so a misused call cannot read past its end). The loops are
written once over the fused type `floating`; the defs pick the specialisation.
"""
from cython cimport floating
import numpy as np

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _channel_vector(v, Py_ssize_t C):
    "`v` as a contiguous float64 vector of C numbers, or None."
    return None if v is None else np.ascontiguousarray(v.reshape(C), dtype=np.float64)


# The row sums keep four partial sums, so that the additions of one row need not wait for each
# other (a single accumulator is a chain of dependent additions, one per 4 cycles or so).
cdef inline double _sum(const floating* r, Py_ssize_t n) noexcept nogil:
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t i = 0
    while i + 4 <= n:
        s0 += r[i]
        s1 += r[i + 1]
        s2 += r[i + 2]
        s3 += r[i + 3]
        i += 4
    while i < n:
        s0 += r[i]
        i += 1
    return (s0 + s1) + (s2 + s3)


cdef inline double _centred_squares(const floating* r, double m, Py_ssize_t n) noexcept nogil:
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, d0, d1, d2, d3
    cdef Py_ssize_t i = 0
    while i + 4 <= n:
        d0 = r[i] - m
        d1 = r[i + 1] - m
        d2 = r[i + 2] - m
        d3 = r[i + 3] - m
        s0 += d0 * d0
        s1 += d1 * d1
        s2 += d2 * d2
        s3 += d3 * d3
        i += 4
    while i < n:
        d0 = r[i] - m
        s0 += d0 * d0
        i += 1
    return (s0 + s1) + (s2 + s3)


cdef inline void _dot_sums(const floating* g, const floating* x, double m, Py_ssize_t n, double* sg,
                           double* sgx) noexcept nogil:
    "sg += sum(g), sgx += sum(g * (x - m)) over one row."
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, b0 = 0.0, b1 = 0.0, b2 = 0.0, b3 = 0.0
    cdef Py_ssize_t i = 0
    while i + 4 <= n:
        a0 += g[i]
        a1 += g[i + 1]
        a2 += g[i + 2]
        a3 += g[i + 3]
        b0 += g[i] * (x[i] - m)
        b1 += g[i + 1] * (x[i + 1] - m)
        b2 += g[i + 2] * (x[i + 2] - m)
        b3 += g[i + 3] * (x[i + 3] - m)
        i += 4
    while i < n:
        a0 += g[i]
        b0 += g[i] * (x[i] - m)
        i += 1
    sg[0] += (a0 + a1) + (a2 + a3)
    sgx[0] += (b0 + b1) + (b2 + b3)


cdef void _moments(const floating* x, double* mean, double* m2, double* n, Py_ssize_t A, Py_ssize_t C,
                   Py_ssize_t B) noexcept nogil:
    cdef Py_ssize_t a, c, i
    cdef const floating* row
    cdef double rm, q, delta, tot
    for c in range(C):
        mean[c] = 0.0
        m2[c] = 0.0
        n[c] = 0.0
    if B == 0: return
    for a in range(A):
        for c in range(C):
            row = x + (a * C + c) * B
            rm = _sum(row, B) / B
            q = _centred_squares(row, rm, B)
            tot = n[c] + B                      # Chan et al.: merge (B, rm, q) into (n, mean, m2)
            delta = rm - mean[c]
            mean[c] += delta * (B / tot)
            m2[c] += q + delta * delta * (n[c] * B / tot)
            n[c] = tot


def channel_moments(x):
    "Mean and biased variance of x (A, C, B) over A and B, per channel: two (C,) arrays of x's dtype, accumulated in float64."
    x = np.ascontiguousarray(x)
    cdef Py_ssize_t A = x.shape[0], C = x.shape[1], B = x.shape[2]
    mean, m2, n = np.empty(C), np.empty(C), np.empty(C)
    cdef double[::1] mv = mean, m2v = m2, nv = n
    cdef const float[:, :, ::1] x32
    cdef const double[:, :, ::1] x64
    if C == 0: return mean.astype(x.dtype), m2.astype(x.dtype)
    if A * B == 0:
        mean[:] = np.nan
        return mean.astype(x.dtype), mean.astype(x.dtype)
    if x.dtype == np.float32:
        x32 = x
        with nogil: _moments(&x32[0, 0, 0], &mv[0], &m2v[0], &nv[0], A, C, B)
    else:
        x64 = x
        with nogil: _moments(&x64[0, 0, 0], &mv[0], &m2v[0], &nv[0], A, C, B)
    return mean.astype(x.dtype), (m2 / (A * B)).astype(x.dtype)


cdef void _normalize(const floating* x, floating* y, const double* mean, const double* scale, const double* shift,
                     Py_ssize_t A, Py_ssize_t C, Py_ssize_t B) noexcept nogil:
    cdef Py_ssize_t a, c, i
    cdef const floating* row
    cdef floating* out
    cdef double m, s, b
    for a in range(A):
        for c in range(C):
            row = x + (a * C + c) * B
            out = y + (a * C + c) * B
            m, s, b = mean[c], scale[c], shift[c]
            for i in range(B): out[i] = <floating>((row[i] - m) * s + b)


def channel_normalize(x, mean, inv_std, weight, bias):
    "y = (x - mean) * inv_std * weight + bias per channel of x (A, C, B); weight and bias may be None."
    x = np.ascontiguousarray(x)
    cdef Py_ssize_t A = x.shape[0], C = x.shape[1], B = x.shape[2]
    m, s = _channel_vector(mean, C), _channel_vector(inv_std, C)
    w, b = _channel_vector(weight, C), _channel_vector(bias, C)
    s = s if w is None else s * w
    b = np.zeros(C) if b is None else b
    y = np.empty_like(x)
    if y.size == 0: return y
    cdef double[::1] mv = m, sv = s, bv = b
    cdef const float[:, :, ::1] x32
    cdef const double[:, :, ::1] x64
    cdef float[:, :, ::1] y32
    cdef double[:, :, ::1] y64
    if x.dtype == np.float32:
        x32, y32 = x, y
        with nogil: _normalize(&x32[0, 0, 0], &y32[0, 0, 0], &mv[0], &sv[0], &bv[0], A, C, B)
    else:
        x64, y64 = x, y
        with nogil: _normalize(&x64[0, 0, 0], &y64[0, 0, 0], &mv[0], &sv[0], &bv[0], A, C, B)
    return y


cdef void _backward(const floating* g, const floating* x, floating* dx, const double* mean, const double* inv_std,
                    const double* w, double* sg, double* sgx, Py_ssize_t A, Py_ssize_t C, Py_ssize_t B) noexcept nogil:
    cdef Py_ssize_t a, c, i
    cdef const floating* grow
    cdef const floating* xrow
    cdef floating* out
    cdef double m, k, c0, c1, M = <double>(A * B)
    for c in range(C):
        sg[c] = 0.0
        sgx[c] = 0.0
    for a in range(A):                          # pass 1: sum(g) and sum(g * (x - mean)) per channel
        for c in range(C):
            grow = g + (a * C + c) * B
            xrow = x + (a * C + c) * B
            _dot_sums(grow, xrow, mean[c], B, &sg[c], &sgx[c])
    for c in range(C): sgx[c] *= inv_std[c]     # sum(g * xhat)
    if dx == NULL: return
    for a in range(A):                          # pass 2: dx = k (g - mean(g)) - k inv_std mean(g xhat) (x - mean)
        for c in range(C):
            grow = g + (a * C + c) * B
            xrow = x + (a * C + c) * B
            out = dx + (a * C + c) * B
            k = inv_std[c] * w[c]
            c0 = k * sg[c] / M
            c1 = k * inv_std[c] * sgx[c] / M
            m = mean[c]
            for i in range(B): out[i] = <floating>(k * grow[i] - c0 - c1 * (xrow[i] - m))


def channel_norm_backward(g, x, mean, inv_std, weight):
    "(dx, sum(g), sum(g * xhat)) of y = xhat * weight + bias, xhat = (x - mean) * inv_std, for x's own batch statistics: dx = inv_std * weight * (g - mean(g) - xhat * mean(g * xhat)) over A and B."
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    if g.shape != x.shape:   # kept as the last line of defence: the loops read g with x's sizes
        raise ValueError("channel_norm_backward: g and x differ in shape; call mytorch.nn.normalization.channel_norm_backward")
    cdef Py_ssize_t A = x.shape[0], C = x.shape[1], B = x.shape[2]
    m, s, w = _channel_vector(mean, C), _channel_vector(inv_std, C), _channel_vector(weight, C)
    w = np.ones(C) if w is None else w
    dx, sg, sgx = np.empty_like(x), np.zeros(C), np.zeros(C)
    if x.size == 0: return dx, sg.astype(x.dtype), sgx.astype(x.dtype)
    cdef double[::1] mv = m, sv = s, wv = w, sgv = sg, sgxv = sgx
    cdef const float[:, :, ::1] x32, g32
    cdef const double[:, :, ::1] x64, g64
    cdef float[:, :, ::1] d32
    cdef double[:, :, ::1] d64
    if x.dtype == np.float32:
        x32, g32, d32 = x, g, dx
        with nogil: _backward(&g32[0, 0, 0], &x32[0, 0, 0], &d32[0, 0, 0], &mv[0], &sv[0], &wv[0], &sgv[0], &sgxv[0], A, C, B)
    else:
        x64, g64, d64 = x, g, dx
        with nogil: _backward(&g64[0, 0, 0], &x64[0, 0, 0], &d64[0, 0, 0], &mv[0], &sv[0], &wv[0], &sgv[0], &sgxv[0], A, C, B)
    return dx, sg.astype(x.dtype), sgx.astype(x.dtype)
