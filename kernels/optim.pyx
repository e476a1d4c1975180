# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# distutils: extra_compile_args = -ffp-contract=off -fno-math-errno
"""The fused Adam update: `adam_update`, one pass over a parameter and its two (or three) moments.

`setup.py` compiles this file into `mytorch._optim`. Its NumPy reference is
`mytorch.optim.adam_update` (nbs/30_optim.ipynb), the update `Adam.step` makes for one
parameter; `compiled_kernel` picks between the two, after the kernel's check
(`_check_adam_update` there: one float dtype and one shape, writeable state) has run once, in
Python, for whichever runs. This function takes the reference's arguments as the check leaves
them, and performs the same roundings in the same order (each hyperparameter is rounded to the
arrays' dtype first, as NumPy does with a Python number next to a float32 array;
`-ffp-contract=off` keeps every product and sum rounded on its own), so that the two agree bit
for bit. (`-fno-math-errno` lets the compiler use the SIMD square
root: C's `sqrt` must otherwise set `errno` for a negative argument, which v never is.)

The reference makes about a dozen passes over memory (one per NumPy call, with a temporary);
this loop reads param, grad and the moments once and writes each once.
"""
from cython cimport floating
from libc.math cimport sqrt, sqrtf
import math
import numpy as np


cdef void _adam(floating[::1] x, const floating[::1] g, floating[::1] m, floating[::1] v, floating[::1] vmax,
                bint amsgrad, bint l2, floating sign, floating wd, floating shrink,
                floating b1, floating b2, floating one_minus_b2, floating eps_scaled,
                floating step_size) noexcept nogil:
    # Branch-free where that is exact, so that GCC can vectorize the loop: maximize multiplies g by
    # sign = -1 (exact), and the decoupled decay multiplies x by shrink, which is 1 (exact) without it.
    # The L2 decay is a branch, since g + 0 * x is not g where x is infinite; it and amsgrad are
    # loop-invariant, and GCC compiles one loop per case.
    cdef Py_ssize_t i
    cdef floating xi, gi, mi, vi, vm, d
    for i in range(x.shape[0]):
        xi = x[i] * shrink                            # x *= 1 - lr * wd (AdamW)
        gi = g[i] * sign                              # g = -g (maximize)
        if l2: gi = gi + wd * xi                      # g = g + wd * x (Adam's weight decay)
        mi = (m[i] - gi) * b1 + gi                    # m -= g; m *= b1; m += g
        m[i] = mi
        vi = v[i] * b2 + (gi * gi) * one_minus_b2     # v = b2 v + (1 - b2) g^2
        v[i] = vi
        if amsgrad:
            vm = vmax[i]
            vm = vi if (vi > vm or vi != vi) else vm  # np.maximum: a NaN in either wins
            vmax[i] = vm
            vi = vm
        if floating is float: d = sqrtf(vi)
        else: d = sqrt(vi)
        d = d + eps_scaled
        x[i] = xi - (mi / d) * step_size


def _flat(a):
    "A 1-D C-contiguous view of a, or a copy of it when a is strided (the caller writes the copy back)."
    return a.reshape(-1) if a.flags.c_contiguous else np.ravel(a)


def adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay,
                maximize, decoupled):
    "One Adam step on one parameter, in place: param, exp_avg, exp_avg_sq (and max_exp_avg_sq for AMSGrad)."
    cdef bint amsgrad = max_exp_avg_sq is not None
    x, g, m, v = _flat(param), _flat(grad), _flat(exp_avg), _flat(exp_avg_sq)
    vmax = _flat(max_exp_avg_sq) if amsgrad else x
    # Kept from the contract, as the last line of defence: the loop runs over x and would read or write past
    # the end of a shorter array. Four comparisons.
    if not (g.shape[0] == m.shape[0] == v.shape[0] == vmax.shape[0] == x.shape[0]):
        raise ValueError("adam_update: the arrays' sizes differ; call mytorch.optim.adam_update")
    cdef double root_bc2 = math.sqrt(1 - beta2 ** step)
    cdef double wd = weight_decay, b1 = beta1, b2 = beta2, omb2 = 1 - beta2
    cdef double shrink = 1 - lr * weight_decay if (weight_decay != 0 and decoupled) else 1
    cdef double eps_scaled = eps * root_bc2, step_size = lr * root_bc2 / (1 - beta1 ** step)
    cdef double sign = -1 if maximize else 1
    cdef bint l2 = weight_decay != 0 and not decoupled
    if param.dtype.char == 'f':
        _adam[float](x, g, m, v, vmax, amsgrad, l2, <float>sign, <float>wd, <float>shrink, <float>b1, <float>b2,
                     <float>omb2, <float>eps_scaled, <float>step_size)
    else:
        _adam[double](x, g, m, v, vmax, amsgrad, l2, sign, wd, shrink, b1, b2, omb2, eps_scaled, step_size)
    for a, f in ((param, x), (exp_avg, m), (exp_avg_sq, v), (max_exp_avg_sq, vmax)):
        if a is not None and not a.flags.c_contiguous: a[...] = f.reshape(a.shape)   # a strided array: write back
