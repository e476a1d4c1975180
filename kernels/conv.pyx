# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""im2col and col2im for the convolution chapter (nbs/25_conv.ipynb), in one pass each.

`setup.py` compiles this file into `mytorch._conv`. The NumPy references are `im2col` and
`col2im` in `mytorch.nn.conv`, marked there with `@compiled_kernel`; these functions take the
same arguments and compute the same numbers, bit for bit: im2col copies, and col2im adds the
terms of every input position in the same order as the reference (kernel offset (i, j) in
row-major order, starting from zero).

What the loops do differently from the references:
- im2col reads the input in place and writes the zeros of the padding as it goes; the
  reference first copies the input into a zero-padded array, then copies every window out
  of it through an `as_strided` view (two passes, one temporary).
- col2im walks the columns once and adds each entry into its input position, skipping the
  ones that fall into padding; the reference makes kh*kw strided whole-array additions,
  each a pass over the output.

The contract (float32 or float64 arrays of the right number of dimensions, a geometry that
fits, an `out` of the right shape, dtype and layout) is checked once, in Python, by each
kernel's `check` (`_check_im2col`, `_check_col2im` in the chapter), before whichever of the
reference and this file's function runs. What is left here is the loops, the layout they need
(non-contiguous inputs are copied with np.ascontiguousarray, never read through strides), and
one guard each kept as the last line of defence (see the comments). The loops are written once
over the fused type `floating`; the defs pick the specialisation from the dtype themselves
(Cython's automatic dispatch costs about a microsecond per call).
"""
from cython cimport floating
from libc.string cimport memcpy, memset
import numpy as np


cdef void _im2col(const floating* x, floating* out, Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W,
                  Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t sh, Py_ssize_t sw,
                  Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t lh, Py_ssize_t lw) noexcept nogil:
    cdef Py_ssize_t pl, i, j, p, q, r, c0, q0, q1
    cdef const floating* row
    cdef floating* o = out
    for pl in range(planes):
        for i in range(kh):
            for j in range(kw):
                c0 = j * dw - lw                        # the input column that output column 0 reads
                q0 = 0                                  # [q0, q1): the output columns that read inside the input
                if c0 < 0: q0 = min(Wo, (-c0 + sw - 1) // sw)
                q1 = Wo
                if c0 + (Wo - 1) * sw >= W: q1 = max(q0, min(Wo, (W - 1 - c0) // sw + 1)) if W - 1 - c0 >= 0 else q0
                for p in range(Ho):
                    r = p * sh + i * dh - lh
                    if r < 0 or r >= H:
                        memset(o, 0, Wo * sizeof(floating))
                    else:
                        row = x + (pl * H + r) * W + c0
                        for q in range(q0): o[q] = 0
                        if sw == 1:
                            memcpy(o + q0, row + q0, (q1 - q0) * sizeof(floating))
                        else:
                            for q in range(q0, q1): o[q] = row[q * sw]
                        for q in range(q1, Wo): o[q] = 0
                    o += Wo


def im2col(x, geom, out=None):
    "Every window of the zero-padded input as a column: (N, C, H, W) -> (N, C, kh, kw, Ho, Wo), contiguous."
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t kh = geom.kernel[0], kw = geom.kernel[1], Ho = geom.out_size[0], Wo = geom.out_size[1]
    cdef Py_ssize_t sh = geom.stride[0], sw = geom.stride[1], dh = geom.dilation[0], dw = geom.dilation[1]
    cdef Py_ssize_t lh = geom.pad_lo[0], lw = geom.pad_lo[1]
    if min(sh, sw, dh, dw) < 1:   # kept as the last line of defence: the loops divide by the strides (in C)
        raise ValueError("im2col: a stride or dilation below 1; call mytorch.nn.conv.im2col")
    if out is None:
        out = np.empty((N, C, kh, kw, Ho, Wo), x.dtype)
    if out.size == 0: return out
    x = np.ascontiguousarray(x)
    cdef float[:, :, :, ::1] x32, o32
    cdef double[:, :, :, ::1] x64, o64
    flat = out.reshape(N, C, kh * kw * Ho, Wo)
    if x.dtype.char == 'f':
        x32, o32 = x, flat
        if x.size == 0: o32[...] = 0
        else:
            with nogil: _im2col[float](&x32[0, 0, 0, 0], &o32[0, 0, 0, 0], N * C, H, W, kh, kw, Ho, Wo, sh, sw, dh, dw, lh, lw)
    else:
        x64, o64 = x, flat
        if x.size == 0: o64[...] = 0
        else:
            with nogil: _im2col[double](&x64[0, 0, 0, 0], &o64[0, 0, 0, 0], N * C, H, W, kh, kw, Ho, Wo, sh, sw, dh, dw, lh, lw)
    return out


cdef void _col2im(const floating* cols, floating* out, Py_ssize_t planes, Py_ssize_t H, Py_ssize_t W,
                  Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t sh, Py_ssize_t sw,
                  Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t lh, Py_ssize_t lw) noexcept nogil:
    cdef Py_ssize_t pl, i, j, p, q, r, c0, q0, q1
    cdef floating* row
    cdef const floating* src = cols
    for pl in range(planes):
        for i in range(kh):
            for j in range(kw):
                c0 = j * dw - lw
                q0 = 0
                if c0 < 0: q0 = min(Wo, (-c0 + sw - 1) // sw)
                q1 = Wo
                if c0 + (Wo - 1) * sw >= W: q1 = max(q0, min(Wo, (W - 1 - c0) // sw + 1)) if W - 1 - c0 >= 0 else q0
                for p in range(Ho):
                    r = p * sh + i * dh - lh
                    if r >= 0 and r < H:
                        row = out + (pl * H + r) * W + c0
                        if sw == 1:
                            for q in range(q0, q1): row[q] += src[q]
                        else:
                            for q in range(q0, q1): row[q * sw] += src[q]
                    src += Wo


def col2im(cols, geom):
    "The adjoint of im2col: (N, C, kh, kw, Ho, Wo) columns added into a new (N, C, H, W) array; padding dropped."
    cdef Py_ssize_t N = cols.shape[0], C = cols.shape[1], kh = cols.shape[2], kw = cols.shape[3]
    cdef Py_ssize_t Ho = cols.shape[4], Wo = cols.shape[5], H = geom.in_size[0], W = geom.in_size[1]
    cdef Py_ssize_t sh = geom.stride[0], sw = geom.stride[1], dh = geom.dilation[0], dw = geom.dilation[1]
    cdef Py_ssize_t lh = geom.pad_lo[0], lw = geom.pad_lo[1]
    if min(sh, sw, dh, dw) < 1:   # kept as the last line of defence: the loops divide by the strides (in C)
        raise ValueError("col2im: a stride or dilation below 1; call mytorch.nn.conv.col2im")
    out = np.zeros((N, C, H, W), cols.dtype)
    if out.size == 0 or cols.size == 0: return out
    cols = np.ascontiguousarray(cols)
    cdef float[:, :, :, ::1] c32, o32
    cdef double[:, :, :, ::1] c64, o64
    flat = cols.reshape(N, C, kh * kw * Ho, Wo)
    if cols.dtype.char == 'f':
        c32, o32 = flat, out
        with nogil: _col2im[float](&c32[0, 0, 0, 0], &o32[0, 0, 0, 0], N * C, H, W, kh, kw, Ho, Wo, sh, sw, dh, dw, lh, lw)
    else:
        c64, o64 = flat, out
        with nogil: _col2im[double](&c64[0, 0, 0, 0], &o64[0, 0, 0, 0], N * C, H, W, kh, kw, Ho, Wo, sh, sw, dh, dw, lh, lw)
    return out
