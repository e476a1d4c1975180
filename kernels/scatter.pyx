# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: extra_compile_args = -ffp-contract=off
"""The scatter-add behind the backward of indexing and of embeddings: `index_add_rows`.

`setup.py` compiles this file into `mytorch._scatter`. Its NumPy reference is
`mytorch.indexing.index_add_rows` (nbs/15_indexing.ipynb), which is `np.add.at(out, index, src)`
plus the contract's checks; `compiled_kernel` picks between the two. This function takes exactly
the reference's arguments, makes the same checks with the same messages, and adds the rows in
the same order, so that the two agree bit for bit, repeated indices included.

NumPy's `np.add.at` is slow because it is general: for every index it sets up an unbuffered
ufunc call over one row. The loop below knows the layout (rows of a C-contiguous 2-D view) and
adds row j of src into row index[j] of out with a plain inner loop, without the GIL.
"""
from cython cimport floating
import numpy as np

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


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


def _check(out, index, src):
    "The reference's checks, with its messages: (out, index as an integer ndarray, src)."
    if not isinstance(out, np.ndarray):
        raise TypeError(f"index_add_rows: out must be a NumPy array (it is written in place), got {type(out).__name__}.")
    index, src = np.asarray(index), np.asarray(src)
    if out.dtype not in _FLOATS or src.dtype != out.dtype:
        raise TypeError(f"index_add_rows: out has dtype {out.dtype} and src {src.dtype}, but the kernel takes one float "
                        f"dtype, float32 or float64, for both. Convert them first, e.g. src.astype(out.dtype).")
    if index.dtype.kind not in 'iu':
        raise TypeError(f"index_add_rows: index must be an integer array, got {index.dtype} (shape {index.shape}). "
                        f"Row numbers are whole numbers: convert it first, e.g. index.astype(np.intp).")
    if out.ndim == 0:
        raise ValueError("index_add_rows: out must have at least one dimension (its rows), got a 0-d array.")
    if index.ndim != 1:
        raise ValueError(f"index_add_rows: index must be 1-D, got shape {index.shape}. Flatten it first, and src's "
                         f"leading dimensions with it: src.reshape((-1,) + out.shape[1:]).")
    want = index.shape + out.shape[1:]
    if src.shape != want:
        raise ValueError(f"index_add_rows: src has shape {src.shape}, but out {out.shape} and index {index.shape} "
                         f"need {want}: one row of out's shape for each index.")
    if not out.flags.writeable:
        raise ValueError(f"index_add_rows: out (shape {out.shape}) is read-only; it is written in place. Pass a copy.")
    return out, index, src


def index_add_rows(out, index, src):
    "out[index[j]] += src[j] for j in order, in place (repeated rows add up); returns out."
    out, index, src = _check(out, index, src)
    cdef Py_ssize_t n = out.shape[0], m = index.shape[0], bad
    if index.dtype.kind == 'u' and index.dtype.itemsize >= np.dtype(np.intp).itemsize and m:
        big = np.flatnonzero(index >= n)   # values past intp's range would wrap when converted below
        if big.size: _out_of_range(index[big[0]], n, out.shape)
    idx = np.ascontiguousarray(index, dtype=np.intp)
    bad = _first_bad(idx, n)
    if bad >= 0: _out_of_range(index[bad], n, out.shape)
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


def _out_of_range(value, n, shape):
    raise IndexError(f"index_add_rows: index {value} is out of bounds for out's {n} rows (out has shape {shape}; "
                     f"valid indices are {-n}..{n - 1}).")
