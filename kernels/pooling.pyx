# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Max pooling with its argmax, and the scatter-add of its backward, for the pooling chapter
(nbs/26_pooling.ipynb), in one pass each.

`setup.py` compiles this file into `mytorch._pooling`. The NumPy references are
`max_pool_with_indices` and `plane_scatter_add` in `mytorch.nn.pooling`, marked there with
`@compiled_kernel`; these functions take the same arguments and return the same numbers, bit
for bit.

What the loops do differently from the references:
- max_pool_with_indices works one output row at a time: the row's maxima and indices stay in
  the cache while every tap updates them in PyTorch's order (`val > max or isnan(val)`, so
  the first maximum wins a tie and the last nan wins), with padded taps skipped rather than
  stored, and the update is branch-free; the reference pads the input with -inf (a copy),
  then makes kh*kw passes over the whole output, each a comparison, two masked copies and
  an index computation. A window whose taps all fall in the padding keeps -inf and the
  index -1 (no position), in both.
- plane_scatter_add adds every gradient into its plane at its index; the reference builds an
  index array of global bins, and `np.bincount`, which accumulates in float64, so float32
  gradients make a float64 round trip through a full-size temporary. The kernel accumulates
  a float32 plane in a float64 row of one plane's size, in the same order as bincount, so the
  results agree exactly.

The contract (a float32 or float64 input, a geometry made for it; for the scatter-add, 2-D
arrays of one shape and every index inside its plane) is checked once, in Python, by each
kernel's `check` (`_check_max_pool_with_indices`, `_check_plane_scatter_add` in the chapter),
before whichever of the reference and this file's function runs. What is left here is the
loops, the layout they need (non-contiguous inputs are copied with np.ascontiguousarray), and
the guards kept as the last line of defence against reading or writing out of bounds (see the
comments).
"""
from cython cimport floating
from libc.stdint cimport int64_t
from libc.math cimport INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memset
import numpy as np

cdef extern from *:
    """
    /* Branch-free selects: c ? a : b through bit masks. Written as a ternary, GCC compiles the
       max pool's update into a branch, which random data mispredicts about half the time. */
    #include <stdint.h>
    #include <string.h>
    static inline double mp_select_double(int c, double a, double b) {
        uint64_t ia, ib, m = (uint64_t)0 - (uint64_t)(c != 0); double r;
        memcpy(&ia, &a, 8); memcpy(&ib, &b, 8); ia = (ia & m) | (ib & ~m); memcpy(&r, &ia, 8); return r;
    }
    static inline float mp_select_float(int c, float a, float b) {
        uint32_t ia, ib, m = (uint32_t)0 - (uint32_t)(c != 0); float r;
        memcpy(&ia, &a, 4); memcpy(&ib, &b, 4); ia = (ia & m) | (ib & ~m); memcpy(&r, &ia, 4); return r;
    }
    static inline int64_t mp_select_int64(int c, int64_t a, int64_t b) {
        int64_t m = -(int64_t)(c != 0); return (a & m) | (b & ~m);
    }
    """
    double mp_select_double(int c, double a, double b) nogil
    float mp_select_float(int c, float a, float b) nogil
    int64_t mp_select_int64(int c, int64_t a, int64_t b) nogil


cdef inline floating _select(int c, floating a, floating b) noexcept nogil:
    if floating is float: return mp_select_float(c, a, b)
    else: return mp_select_double(c, a, b)

cdef inline Py_ssize_t _first_real(Py_ssize_t start, Py_ssize_t d) noexcept nogil:
    "The first position >= 0 of a window starting at `start` with taps `d` apart (as the reference's _first_real)."
    if start < 0: return start + (-start + d - 1) // d * d
    return start


cdef inline Py_ssize_t _first_inside(Py_ssize_t start, Py_ssize_t k, Py_ssize_t d, Py_ssize_t n) noexcept nogil:
    "The first tap inside [0, n) of a window starting at `start` with k taps d apart, or -1 when every tap is padding."
    cdef Py_ssize_t f = _first_real(start, d)
    if f >= n or f > start + (k - 1) * d: return -1
    return f


cdef void _max_pool(const floating* a, floating* best_out, int64_t* index_out, Py_ssize_t planes,
                    Py_ssize_t H, Py_ssize_t W, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw,
                    Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw,
                    Py_ssize_t oh, Py_ssize_t ow) noexcept nogil:
    # One output row at a time: its maxima and indices start at -inf and each window's first real
    # position, then every tap (i, j), in PyTorch's scan order, updates the whole row. Each
    # window still sees its taps in order, so ties and nans resolve exactly as in the per-window
    # loop; but the innermost loop now runs along the row, over independent windows, so the
    # comparisons of neighbouring windows overlap instead of waiting for each other (a window's
    # own taps form a chain of dependent compare-and-selects, slower than the row's loads and
    # stores, which stay in the cache). A window whose taps all lie in the padding (a dilated window
    # that steps over a short input) keeps -inf and gets the index -1: it has no position to report.
    cdef Py_ssize_t pl, p, q, i, j, h0, r, c0, q0, q1, first_h, first_w, at
    cdef floating v
    cdef int better
    cdef const floating* plane
    cdef const floating* row
    cdef floating* bo
    cdef int64_t* io
    for pl in range(planes):
        plane = a + pl * H * W
        for p in range(oh):
            bo = best_out + (pl * oh + p) * ow
            io = index_out + (pl * oh + p) * ow
            h0 = p * sh - ph
            first_h = _first_inside(h0, kh, dh, H)
            for q in range(ow):
                bo[q] = -INFINITY
                first_w = _first_inside(q * sw - pw, kw, dw, W)
                io[q] = -1 if first_h < 0 or first_w < 0 else first_h * W + first_w
            for i in range(kh):
                r = h0 + i * dh
                if r < 0 or r >= H: continue
                row = plane + r * W
                for j in range(kw):
                    c0 = j * dw - pw                    # the column that window 0 reads at this tap
                    q0 = 0                              # [q0, q1): the windows whose tap lies inside the row
                    if c0 < 0: q0 = min(ow, (-c0 + sw - 1) // sw)
                    q1 = ow
                    if c0 + (ow - 1) * sw >= W: q1 = max(q0, min(ow, (W - 1 - c0) // sw + 1)) if W - 1 - c0 >= 0 else q0
                    at = r * W + c0
                    for q in range(q0, q1):
                        v = row[c0 + q * sw]
                        better = (v > bo[q]) | (v != v)     # PyTorch's `val > max || isnan(val)`
                        bo[q] = _select(better, v, bo[q])
                        io[q] = mp_select_int64(better, at + q * sw, io[q])


def max_pool_with_indices(a, geo):
    "(values, indices) of the max pool of a (..., H, W) array: each window's maximum and its flat index h * W + w."
    if a.ndim < 2:   # kept as the last line of defence: a 1-D a would be read as an n x n plane
        raise ValueError("max_pool_with_indices: a has fewer than 2 dims; call mytorch.nn.pooling.max_pool_with_indices")
    cdef Py_ssize_t H = a.shape[a.ndim - 2], W = a.shape[a.ndim - 1]
    cdef Py_ssize_t kh = geo.kernel[0], kw = geo.kernel[1], sh = geo.stride[0], sw = geo.stride[1]
    cdef Py_ssize_t ph = geo.padding[0], pw = geo.padding[1], dh = geo.dilation[0], dw = geo.dilation[1]
    cdef Py_ssize_t oh = geo.out_size[0], ow = geo.out_size[1]
    if min(sh, sw, dh, dw) < 1:   # kept as the last line of defence: the loop divides by the strides (in C)
        raise ValueError("max_pool_with_indices: a stride or dilation below 1; call mytorch.nn.pooling.max_pool_with_indices")
    lead = a.shape[:a.ndim - 2]
    cdef Py_ssize_t planes = 1
    for n in lead: planes *= n
    values = np.empty(lead + (oh, ow), a.dtype)
    index = np.empty(lead + (oh, ow), np.int64)
    if values.size == 0: return values, index
    a = np.ascontiguousarray(a)
    cdef float[::1] a32, v32
    cdef double[::1] a64, v64
    cdef int64_t[::1] ix = index.reshape(-1)
    if a.dtype.char == 'f':
        a32, v32 = a.reshape(-1), values.reshape(-1)
        with nogil: _max_pool[float](&a32[0], &v32[0], &ix[0], planes, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    else:
        a64, v64 = a.reshape(-1), values.reshape(-1)
        with nogil: _max_pool[double](&a64[0], &v64[0], &ix[0], planes, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    return values, index


cdef Py_ssize_t _first_outside(const int64_t* idx, Py_ssize_t size, Py_ssize_t n) noexcept nogil:
    "The flat position of the first index outside [0, n), or -1 when every index is inside."
    cdef Py_ssize_t o
    for o in range(size):
        if idx[o] < 0 or idx[o] >= n: return o
    return -1


cdef void _scatter_add(const floating* g, const int64_t* idx, floating* out, double* acc,
                       Py_ssize_t planes, Py_ssize_t m, Py_ssize_t n) noexcept nogil:
    "Add g[p, o] into out[p, idx[p, o]]; every index must lie in [0, n) (checked by the caller, before)."
    cdef Py_ssize_t p, o, k
    cdef int64_t t
    for p in range(planes):
        if acc != NULL: memset(acc, 0, n * sizeof(double))
        for o in range(m):
            t = idx[o]
            if acc != NULL: acc[t] += <double>g[o]
            else: out[t] += g[o]
        if acc != NULL:
            for k in range(n): out[k] = <floating>acc[k]
        g += m
        idx += m
        out += n


def plane_scatter_add(g, idx, n):
    "A new (P, n) array, zero but for each g[p, o] added at position idx[p, o] of row p; g and idx are (P, m)."
    if g.ndim != 2 or idx.shape != g.shape:   # kept as the last line of defence: the loop reads idx as g's shape
        raise ValueError("plane_scatter_add: g and idx differ in shape; call mytorch.nn.pooling.plane_scatter_add")
    cdef Py_ssize_t P = g.shape[0], m = g.shape[1], N = n
    out = np.zeros((P, N), g.dtype)
    if out.size == 0 or g.size == 0: return out
    g = np.ascontiguousarray(g)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    cdef float[:, ::1] g32, o32
    cdef double[:, ::1] g64, o64
    cdef const int64_t[:, ::1] ix = idx
    cdef double* acc = NULL
    cdef Py_ssize_t bad
    # Kept from the contract, as the last line of defence: an index outside its plane would write past the end
    # of out. One pass over the indices in C, before anything is written.
    with nogil: bad = _first_outside(&ix[0, 0], P * m, N)
    if bad >= 0:
        raise IndexError("plane_scatter_add: an index is out of range; call mytorch.nn.pooling.plane_scatter_add")
    if g.dtype.char == 'f':
        g32, o32 = g, out
        acc = <double*>malloc(N * sizeof(double))
        if acc == NULL: raise MemoryError()
        try:
            with nogil: _scatter_add[float](&g32[0, 0], &ix[0, 0], &o32[0, 0], acc, P, m, N)
        finally:
            free(acc)
    else:
        g64, o64 = g, out
        with nogil: _scatter_add[double](&g64[0, 0], &ix[0, 0], &o64[0, 0], NULL, P, m, N)
    return out
