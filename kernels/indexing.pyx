# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: extra_compile_args = -ffp-contract=off
"""The scatter-add behind the backward of indexing and of embeddings: `index_add_rows`.

`setup.py` compiles this file into `mytorch._indexing`. Its NumPy reference is
`mytorch.indexing.index_add_rows` (nbs/15_indexing.ipynb), which is `np.add.at(out, index, src)`;
`compiled_kernel` picks between the two, after the kernel's check (`_check_index_add_rows`
there: dtypes, shapes, a writeable out, every index in range) has run once, in Python, for
whichever runs. This function takes the reference's arguments as the check leaves them and adds
the rows in the same order, so that the two agree bit for bit, repeated indices included.

NumPy's `np.add.at` is slow because it is general: for every index it sets up an unbuffered
ufunc call over one row. The loop below knows the layout (rows of a C-contiguous 2-D view) and
adds row j of src into row index[j] of out with a plain inner loop, without the GIL.
"""
from cython cimport floating
import numpy as np


cdef Py_ssize_t _first_bad(const Py_ssize_t[::1] idx, Py_ssize_t n) noexcept nogil:
    "The position of the first index outside [-n, n), or -1 when every index is in range."
    cdef Py_ssize_t j, r
    for j in range(idx.shape[0]):
        r = idx[j]
        if r < -n or r >= n:
            return j
    return -1


cdef void _add_rows(floating[:, ::1] out, const Py_ssize_t[::1] idx, const floating[:, ::1] src) noexcept nogil:
    cdef Py_ssize_t j, k, r, n = out.shape[0], w = out.shape[1]
    for j in range(idx.shape[0]):
        r = idx[j]
        if r < 0:
            r += n
        for k in range(w):
            out[r, k] += src[j, k]


def index_add_rows(out, index, src):
    "out[index[j]] += src[j] for j in order, in place (repeated rows add up); returns out."
    cdef Py_ssize_t n = out.shape[0], m = index.shape[0]
    idx = np.ascontiguousarray(index, dtype=np.intp)
    # Kept from the contract, as the last line of defence: an index out of range would write past the
    # end of out. One pass over the indices in C, a fraction of the additions' cost.
    if _first_bad(idx, n) >= 0:
        raise IndexError("index_add_rows: an index is out of range; call mytorch.indexing.index_add_rows")
    if m == 0 or out.size == 0: return out
    w = out.size // n
    work = out if out.flags.c_contiguous else np.ascontiguousarray(out)   # a strided out: add into a copy, then write back
    if np.may_share_memory(src, out): src = src.copy()   # src overlapping out: add the values it had, as np.add.at does
    rows, add = work.reshape(n, w), np.ascontiguousarray(src).reshape(m, w)
    if out.dtype.char == 'f':
        _add_rows[float](rows, idx, add)
    else:
        _add_rows[double](rows, idx, add)
    if work is not out: out[...] = work
    return out
