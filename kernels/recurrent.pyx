# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# distutils: extra_compile_args = -ffp-contract=off
"""The LSTM cell's gate step and its backward: `lstm_gates` and `lstm_gates_backward`.

`setup.py` compiles this file into `mytorch._recurrent`. The NumPy references are
`mytorch.nn.recurrent.lstm_gates` and `lstm_gates_backward` (nbs/28_recurrent.ipynb), one time
step of the fused LSTM's forward and backward loops; `compiled_kernel` picks between each pair,
after the kernel's check (`_check_lstm_gates`, `_check_lstm_gates_backward` there: one float
dtype, 2-D arrays of matching batch and hidden sizes, writeable outputs) has run once, in Python,
for whichever runs. These functions take the references' arguments as the check leaves them.

The references make about ten NumPy calls per step (exp, add, reciprocal, the tanh rescaling
of g, the cell update, tanh, the output) over (batch, 4 * hidden) or (batch, hidden) arrays,
each a pass over memory and a microsecond or more of call overhead. The loops below go over
each row once: the four gates of one hidden unit are finished, the cell and the output written,
while they are still in registers. The arithmetic is the references', operation for operation
(`-ffp-contract=off` keeps each product rounded), so the two agree bit for bit.

exp and tanh are left to NumPy, called on whole arrays: its SIMD versions of them are several
times faster, in float32, than the C library's `expf`/`tanhf` called once per element (which
a first version of this kernel used, and lost to the reference with). The forward step is
therefore four calls (exp, the cell loop, tanh, the output loop) instead of the reference's ten.
"""
from cython cimport floating
import numpy as np


cdef void _cell(floating[:, ::1] a, const floating[:, ::1] cp, floating[:, ::1] c) noexcept nogil:
    "a holds e^{-z} (e^{-2z} for g): a becomes the gates i, f, g, o, and c = f c_prev + i g."
    cdef Py_ssize_t b, j, H = c.shape[1]
    cdef floating one = 1, two = 2, i, f, g
    for b in range(a.shape[0]):
        for j in range(4 * H):                     # sigmoid of every gate (of 2 z for g): 1 / (1 + e^{-z})
            a[b, j] = one / (one + a[b, j])
        for j in range(H):
            i, f = a[b, j], a[b, H + j]
            g = two * a[b, 2 * H + j] - one          # tanh z = 2 sigmoid(2 z) - 1
            a[b, 2 * H + j] = g
            c[b, j] = f * cp[b, j] + i * g           # c_t = f c_{t-1} + i g


cdef void _output(const floating[:, ::1] a, const floating[:, ::1] tc, floating[:, ::1] h) noexcept nogil:
    "h = o tanh(c_t)."
    cdef Py_ssize_t b, j, H = h.shape[1]
    for b in range(h.shape[0]):
        for j in range(H):
            h[b, j] = a[b, 3 * H + j] * tc[b, j]


cdef void _gates_backward(const floating[:, ::1] G, const floating[:, ::1] cp, const floating[:, ::1] tc,
                          const floating[:, ::1] dh, floating[:, ::1] dc, floating[:, ::1] dz) noexcept nogil:
    cdef Py_ssize_t b, j, H = tc.shape[1]
    cdef floating one = 1, i, f, g, o, t, d, dcv
    for b in range(G.shape[0]):
        for j in range(H):
            i, f, g, o = G[b, j], G[b, H + j], G[b, 2 * H + j], G[b, 3 * H + j]
            t, d = tc[b, j], dh[b, j]
            dcv = dc[b, j] + ((one - t * t) * o) * d           # dL/dc_t: through h_t, plus step t+1's
            dz[b, j] = (dcv * g) * ((one - i) * i)             # dL/dz_i = dc g sigma'
            dz[b, H + j] = (dcv * cp[b, j]) * ((one - f) * f)  # dL/dz_f = dc c_{t-1} sigma'
            dz[b, 2 * H + j] = (dcv * i) * (one - g * g)       # dL/dz_g = dc i (1 - g^2)
            dz[b, 3 * H + j] = (d * t) * ((one - o) * o)       # dL/dz_o = dh tanh(c_t) sigma'
            dc[b, j] = dcv * f                                 # dL/dc_{t-1} along the cell state


def _contiguous(arrays):
    "Each array, or a C-contiguous copy of it when it is strided (the caller writes copies of outputs back)."
    return [x if x.flags.c_contiguous else np.ascontiguousarray(x) for x in arrays]


def lstm_gates(a, c_prev, c, tc, h):
    "One LSTM step from the scaled pre-activations a: a becomes the gates (i, f, g, o); c, tanh(c) and h are written. Returns h."
    # Kept from the contract, as the last line of defence: the loops take the batch and hidden sizes from a
    # and c, and would read or write past the end of a smaller array. Four comparisons.
    B, H = c.shape[0], c.shape[1]
    if a.shape != (B, 4 * H) or c_prev.shape != c.shape or tc.shape != c.shape or h.shape != c.shape:
        raise ValueError("lstm_gates: the arrays' shapes disagree; call mytorch.nn.recurrent.lstm_gates")
    arrays = (a, c_prev, c, tc, h)
    work = _contiguous(arrays)
    wa, wc, wtc = work[0], work[2], work[3]
    np.exp(wa, out=wa)            # NumPy's exp and tanh: SIMD code that the C library's, one element
    if a.dtype.char == 'f':       # at a time, does not beat (and the same roundings as the reference)
        _cell[float](wa, work[1], wc)
        np.tanh(wc, out=wtc)
        _output[float](wa, wtc, work[4])
    else:
        _cell[double](wa, work[1], wc)
        np.tanh(wc, out=wtc)
        _output[double](wa, wtc, work[4])
    for k in (0, 2, 3, 4):
        if work[k] is not arrays[k]: arrays[k][...] = work[k]   # a strided output: write the copy back
    return h


def lstm_gates_backward(gates, c_prev, tc, dh, dc, dz):
    "One step of LSTM backpropagation: dz = dL/d(pre-activations) is written, dc becomes dL/dc_{t-1}. Returns dz."
    # Kept from the contract, as the last line of defence: the loop takes the batch and hidden sizes from tc
    # and would read or write past the end of a smaller array. Five comparisons.
    s = tc.shape
    if (gates.shape != dz.shape or gates.shape != (s[0], 4 * s[1]) or c_prev.shape != s or dh.shape != s
            or dc.shape != s):
        raise ValueError("lstm_gates_backward: the arrays' shapes disagree; call mytorch.nn.recurrent.lstm_gates_backward")
    arrays = (gates, c_prev, tc, dh, dc, dz)
    work = _contiguous(arrays)
    if gates.dtype.char == 'f':
        _gates_backward[float](work[0], work[1], work[2], work[3], work[4], work[5])
    else:
        _gates_backward[double](work[0], work[1], work[2], work[3], work[4], work[5])
    for k in (4, 5):
        if work[k] is not arrays[k]: arrays[k][...] = work[k]
    return dz
