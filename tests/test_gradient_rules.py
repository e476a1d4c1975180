"""Every gradient rule's docstring formula agrees with its Function's backward.

`mytorch.autograd.gradient_rules()` prints one formula per Function ('log(x): dx = g / x').
Here each formula's right-hand side is evaluated with NumPy on random float64 inputs
(`check_rule`) and compared with the gradient mytorch computes through the Function. A rule
whose docstring is prose rather than a formula is listed in PROSE_ONLY with the reason; that
set may name only rules that exist and are not evaluable, so it cannot go stale.
"""
import ast

import numpy as np
import pytest

import mytorch
import mytorch.ode, mytorch.compiler, mytorch.units, mytorch.distributed   # every chapter with rules, whatever ran before
from mytorch.autograd import Function, gradient_rules, rule_formulas, formula_names, check_rule

# `2 (x - mean(x))` compiles to a call of 2, which Python warns about; that rule is in PROSE_ONLY.
pytestmark = pytest.mark.filterwarnings("ignore:'int' object is not callable:SyntaxWarning")

RNG = np.random.default_rng(0)
def normal(*shape): return RNG.standard_normal(shape)
def positive(*shape): return RNG.uniform(0.5, 2.0, shape)
def away_from_zero(*shape): return RNG.choice([-1.0, 1.0], shape) * RNG.uniform(0.5, 2.0, shape)


def _classes():
    "(module without 'mytorch.', name) -> the Function subclass, as gradient_rules names them."
    out, stack = {}, list(Function.__subclasses__())
    while stack:
        cls = stack.pop(); stack.extend(cls.__subclasses__())
        if cls.__module__.startswith('mytorch.'): out.setdefault((cls.__module__.split('.', 1)[1], cls.__name__), cls)
    return out


def _reducing(dims, x):
    "The names reduction rules use, reducing over `dims` of `x`: expand(g) reinserts the reduced dims and broadcasts."
    keep = lambda f: (lambda a: f(a, axis=dims, keepdims=True))
    return dict(dims=dims, expand=lambda a, shape=None: np.broadcast_to(np.expand_dims(a, dims), x.shape),
                sum=keep(np.sum), mean=keep(np.mean), amax=keep(np.amax), amin=keep(np.amin),
                logsumexp=lambda a: np.log(np.sum(np.exp(a), axis=dims, keepdims=True)),
                n=np.prod([x.shape[d] for d in dims]))


def _pad(a, widths, value=0):
    "PyTorch's pad on NumPy: (before, after) pairs from the last dim backwards; negative widths crop."
    a, widths = np.asarray(a), [int(w) for w in widths]
    for k in range(len(widths) // 2):
        d, lo, hi = a.ndim - 1 - k, widths[2 * k], widths[2 * k + 1]
        a = np.pad(a, [(max(lo, 0), max(hi, 0)) if i == d else (0, 0) for i in range(a.ndim)], constant_values=value)
        a = np.take(a, np.arange(-min(lo, 0), a.shape[d] + min(hi, 0)), axis=d)
    return a


def _softmax(x, dim): e = np.exp(x - x.max(dim, keepdims=True)); return e / e.sum(dim, keepdims=True)
def _sum_dim(a, dim): return np.sum(a, axis=dim, keepdims=True)


def _diagonal_embed(a, shape, offset, dim1, dim2):
    "Zeros of `shape` with `a` (diagonal in its last dim) on diagonal `offset` of dims dim1, dim2: the adjoint of np.diagonal."
    out = np.zeros(shape)
    idx = np.indices(shape)
    on = idx[dim2] - idx[dim1] == offset
    rest = [d for d in range(len(shape)) if d not in (dim1, dim2)]
    pos = tuple(i[on] for i in (idx[d] for d in rest)) + (np.minimum(idx[dim1], idx[dim2])[on],)
    out[on] = a[pos]
    return out


def _segment_sum(a, repeats, dim):
    "Sums of consecutive runs of `repeats` entries along `dim`: the adjoint of np.repeat."
    ends = np.cumsum(repeats)
    return np.stack([np.take(a, np.arange(e - r, e), dim).sum(dim) for r, e in zip(repeats, ends)], dim)


def _windows(a, dim, size, step):
    "Tensor.unfold with NumPy: windows of `size` along `dim`, `step` apart, laid along a new last dim."
    return np.take(np.lib.stride_tricks.sliding_window_view(a, size, axis=dim), np.arange(0, a.shape[dim] - size + 1, step), dim)


def _fold_windows(a, shape, dim, size, step):
    "The adjoint of _windows: each window added back at its place along `dim`."
    out = np.zeros(shape)
    for w in range(a.shape[dim]):
        for j in range(size):
            dst = [slice(None)] * len(shape); dst[dim] = w * step + j
            out[tuple(dst)] += np.take(np.take(a, w, dim), j, -1)
    return out

x34, a34, b34, p34 = normal(3, 4), normal(3, 4), away_from_zero(3, 4), positive(3, 4)
x234 = normal(2, 3, 4)
TIED = np.where(np.arange(12).reshape(3, 4) % 3 == 0, a34, normal(3, 4))   # b == a at a third of the places
WITH_TIES = np.array([[1., 3., 3., 0.], [2., 2., 2., 2.], [-1., 5., 0., 4.]])   # tied maxima and minima in a row
T = mytorch
WELL3 = normal(3, 3) + 3 * np.eye(3)   # a well-conditioned matrix, for inverse and det

def _avg_pool_transpose(g):
    "AvgPoolTranspose of a (2, 3, 3, 4) gradient into (2, 3, 6, 7): avg_pool2d(x, 3, 2, 1, count_include_pad=False)'s adjoint."
    geo = T.nn.pooling._geometry(T.zeros(2, 3, 6, 7), 2, 'avg_pool2d', 3, 2, 1, 1, False)
    return T.nn.pooling.AvgPoolTranspose.apply(g, geo, T.nn.pooling._avg_divisor(geo, False, None, g.dtype), (2, 3, 6, 7))

def _rnn_weights(gates, I=4, H=5):
    "W_ih, W_hh, b_ih, b_hh of a recurrent layer with `gates` gates, input size I and hidden size H."
    return dict(W_ih=0.5 * normal(gates * H, I), W_hh=0.5 * normal(gates * H, H), b_ih=0.3 * normal(gates * H),
                b_hh=0.3 * normal(gates * H))

PLANE_IDX = np.array([[0, 3, 3, 5], [1, 1, 1, 0]])   # repeated indices: the scatter must add

# Function name -> (call, inputs, other names the formula uses). Inputs are float64 and named as in the rule.
CASES = {
    'Add': (lambda a, b: a + b, dict(a=a34, b=normal(3, 4)), {}),
    'Expand': (lambda x: x.expand(3, 4), dict(x=normal(1, 4)), dict(shape=(3, 4))),
    'Mul': (lambda a, b: a * b, dict(a=a34, b=normal(3, 4)), {}),
    'SumTo': (lambda x: T.engine.SumTo.apply(x, (1, 4)), dict(x=x34), dict(shape=(1, 4))),
    'Clone': (lambda x: x.clone(), dict(x=x34), {}),
    'Abs': (T.abs, dict(x=away_from_zero(3, 4)), {}),
    'Cos': (T.cos, dict(x=x34), {}),
    'Div': (lambda a, b: a / b, dict(a=a34, b=b34), {}),
    'Exp': (T.exp, dict(x=x34), {}),
    'Log': (T.log, dict(x=p34), {}),
    'Log1p': (T.log1p, dict(x=p34), {}),
    'Neg': (lambda x: -x, dict(x=x34), {}),
    'Rsqrt': (T.rsqrt, dict(x=p34), {}),
    'Sigmoid': (T.sigmoid, dict(x=x34), {}),
    'Sign': (T.sign, dict(x=away_from_zero(3, 4)), {}),
    'Sin': (T.sin, dict(x=x34), {}),
    'Sqrt': (T.sqrt, dict(x=p34), {}),
    'Sub': (lambda a, b: a - b, dict(a=a34, b=normal(3, 4)), {}),
    'Tanh': (T.tanh, dict(x=x34), {}),
    'Cumsum': (lambda x: T.cumsum(x, 1), dict(x=x34), dict(dim=1)),
    'Median': (T.median, dict(x=WITH_TIES), dict(median=lambda a: np.sort(a, axis=None)[(a.size - 1) // 2], sum=np.sum)),
    'ReverseCumsum': (lambda x: T.reductions.ReverseCumsum.apply(x, 1), dict(x=x34), dict(dim=1)),
    'LogSumExp': (lambda x: T.logsumexp(x, (0, 2)), dict(x=x234), _reducing((0, 2), x234)),
    'Norm1': (lambda x: T.norm(x, p=1, dim=1), dict(x=away_from_zero(3, 4)), _reducing((1,), x34)),
    'Cat': (lambda xs: T.cat(xs, 1), dict(x=[normal(3, 2), normal(3, 4)]), dict(sizes=[2, 4], dim=1)),
    'Flip': (lambda x: T.flip(x, (0, 2)), dict(x=x234), dict(dims=(0, 2))),
    'Pad': (lambda x: T.nn.functional.pad(x, (1, 2, 0, 1), value=0.5), dict(x=x34),
            dict(widths=np.array([1, 2, 0, 1]), value=0.5, pad=_pad)),
    'Permute': (lambda x: x.permute(2, 0, 1), dict(x=x234), dict(dims=(2, 0, 1))),
    'Reshape': (lambda x: x.reshape(4, 3), dict(x=x34), dict(shape=(4, 3))),
    'View': (lambda x: x.view(2, 6), dict(x=x34), dict(shape=(2, 6))),
    'Stack': (lambda xs: T.stack(xs, 1), dict(x=[normal(3, 4), normal(3, 4)]), dict(dim=1)),
    'Tril': (lambda x: T.tril(x, -1), dict(x=normal(4, 4)), dict(k=-1)),
    'Triu': (lambda x: T.triu(x, 1), dict(x=normal(4, 4)), dict(k=1)),
    'Softmax': (lambda x: T.softmax(x, 1), dict(x=x34), dict(s=_softmax(x34, 1), dim=1, sum=_sum_dim)),
    'LogSoftmax': (lambda x: T.log_softmax(x, 1), dict(x=x34), dict(y=np.log(_softmax(x34, 1)), dim=1, sum=_sum_dim)),
    'Erf': (T.erf, dict(x=x34), {}),
    'Clamp': (lambda x: T.clamp(x, -0.5, 0.5), dict(x=x34), {'min': -0.5, 'max': 0.5}),
    'Maximum': (T.maximum, dict(a=a34, b=TIED), {}),
    'Minimum': (T.minimum, dict(a=a34, b=TIED), {}),
    'Pow': (lambda a, b: a ** b, dict(a=p34, b=normal(3, 4)), {}),
    'PowScalar': (lambda x: x ** 2.5, dict(x=p34), dict(n=2.5)),
    'Relu': (T.relu, dict(x=away_from_zero(3, 4)), {}),
    'Where': (lambda a, b: T.where(T.tensor(x34 > 0), a, b), dict(a=a34, b=normal(3, 4)), dict(c=x34 > 0)),
    'Amax': (lambda x: T.amax(x, 1), dict(x=WITH_TIES), _reducing((1,), WITH_TIES)),
    'Amin': (lambda x: T.amin(x, 1), dict(x=WITH_TIES), _reducing((1,), WITH_TIES)),
    'Mean': (lambda x: T.mean(x, (0, 2)), dict(x=x234), _reducing((0, 2), x234)),
    'Sum': (lambda x: T.sum(x, (0, 2)), dict(x=x234), _reducing((0, 2), x234)),
    'Norm2': (lambda x: T.norm(x, dim=1), dict(x=x34), dict(_reducing((1,), x34), norm2=lambda a: np.sqrt((a * a).sum(1)))),
    'Std': (lambda x: T.std(x, 1), dict(x=x34), dict(_reducing((1,), x34), c=1, std=lambda a: np.std(a, axis=1, ddof=1))),
    'MatMul': (lambda a, b: a @ b, dict(a=normal(3, 4), b=normal(4, 2)), {}),
    'Remainder': (T.remainder, dict(x=x34, y=b34), dict(floor_divide=np.floor_divide)),
    'Fmod': (T.fmod, dict(x=x34, y=b34), dict(trunc=np.trunc)),
    'Copy': (lambda x, src: (x * 1.0).copy_(src), dict(x=x34, src=a34), {}),
    'Floor': (T.floor, dict(x=x34), {}),
    'Ceil': (T.ceil, dict(x=x34), {}),
    'Trunc': (T.trunc, dict(x=x34), {}),
    'Round': (lambda x: T.round(x, decimals=1), dict(x=x34), {}),
    'Frac': (T.frac, dict(x=x34), {}),
    'RoundedDiv': (lambda a, b: T.div(a, b, rounding_mode='floor'), dict(a=a34, b=b34), dict(rounding_mode='floor')),
    'Expm1': (T.expm1, dict(x=x34), dict(expm1=np.expm1)),
    'Log2': (T.log2, dict(x=p34), {}),
    'Log10': (T.log10, dict(x=p34), {}),
    'Atan2': (T.atan2, dict(a=a34, b=b34), {}),
    'Hypot': (T.hypot, dict(a=a34, b=b34), dict(hypot=np.hypot)),
    'Lerp': (T.lerp, dict(a=a34, b=x34, w=normal(3, 4)), {}),
    'NanToNum': (T.nan_to_num, dict(x=np.where(TIED > 1, np.inf, np.where(TIED < -1, np.nan, x34))), dict(isfinite=np.isfinite)),
    'Diagonal': (lambda x: T.diagonal(x, 1, 2, 0), dict(x=x234.transpose(2, 0, 1)),
                 dict(offset=1, dim1=2, dim2=0, diagonal_embed=_diagonal_embed)),
    'DiagonalEmbed': (lambda x: T.diag_embed(x, -1, 0, 2), dict(x=normal(2, 3)),
                      dict(offset=-1, dim1=0, dim2=2, diagonal=np.diagonal)),
    'Roll': (lambda x: T.roll(x, (1, -2), (0, 2)), dict(x=x234), dict(shifts=np.array([1, -2]), dims=(0, 2), roll=np.roll)),
    'RepeatInterleave': (lambda x: T.repeat_interleave(x, T.tensor([2, 0, 3]), 1), dict(x=normal(2, 3)),
                         dict(repeats=[2, 0, 3], dim=1, segment_sum=_segment_sum)),
    'SegmentSum': (lambda x: T.shape.SegmentSum.apply(x, (2, 0, 3), 1), dict(x=normal(2, 5)),
                   dict(repeats=[2, 0, 3], dim=1, repeat_interleave=np.repeat)),
    'Unfold': (lambda x: x.unfold(1, 3, 2), dict(x=normal(2, 7)), dict(dim=1, size=3, step=2, fold_windows=_fold_windows)),
    'FoldWindows': (lambda x: T.shape.FoldWindows.apply(x, (2, 7), 1, 3, 2), dict(x=normal(2, 3, 3)),
                    dict(dim=1, size=3, step=2, unfold=_windows)),
    # the other rules of the reductions and shape chapters with an array form (words in their docstrings: PROSE_ONLY),
    # and the chapters' private Functions, called directly
    'MaxDim': (lambda x: T.max(x, 1).values, dict(x=x34), {}),
    'MinDim': (lambda x: T.min(x, 0, keepdim=True).values, dict(x=x34), {}),
    'Kthvalue': (lambda x: T.kthvalue(x, 2, 1).values, dict(x=x34), {}),
    'MedianDim': (lambda x: T.median(x, 1).values, dict(x=x34), {}),
    'Mode': (lambda x: T.mode(x, 1).values, dict(x=WITH_TIES), {}),
    'Prod': (lambda x: T.prod(x, 1), dict(x=x34), {}),
    'ProdOthers': (lambda x, d: T.reductions.ProdOthers.apply(x, (1,), d), dict(x=x34, d=normal(3, 4)), {}),
    'Cumprod': (lambda x: T.cumprod(x, 1), dict(x=p34), {}),   # no zeros: with zeros the two rules are different algorithms
    'NormInf': (lambda x: T.norm(x, p=float('inf'), dim=1), dict(x=WITH_TIES), {}),
    'Narrow': (lambda x: x.narrow(1, 1, 2), dict(x=x34), {}),
    'Split': (lambda x: x.split([1, 3], 1), dict(x=x34), {}),
    'Unbind': (lambda x: x.unbind(1), dict(x=x34), {}),
    '_Reshape': (lambda x: T.reductions._Reshape.apply(x, (4, 3)), dict(x=x34), {}),
    '_TakeAlong': (lambda x: T.sort(x, 1).values, dict(x=x34), {}),
    '_PutAlong': (lambda x: T.reductions._PutAlong.apply(x, np.argsort(x34, 1), 1, (3, 4)), dict(x=x34), {}),
    '_Reciprocal': (lambda x: T.reductions._Reciprocal.apply(x), dict(x=b34), {}),
    'Addmm': (lambda m, a, b: T.addmm(m, a, b, beta=0.5, alpha=-2.0), dict(input=normal(2, 3), mat1=normal(2, 4), mat2=normal(4, 3)),
              dict(beta=0.5, alpha=-2.0)),
    'Cross': (lambda a, b: T.cross(a, b, dim=1), dict(a=normal(4, 3), b=normal(4, 3)),
              dict(dim=1, cross=lambda a, b, dim: np.cross(a, b, axis=dim))),
    'Inverse': (T.inverse, dict(x=WELL3), dict(y=np.linalg.inv(WELL3))),
    'Det': (T.det, dict(x=WELL3), dict(y=np.linalg.det(WELL3), inverse=np.linalg.inv)),
    # chapters 15-16: indexing, einsum and the shape helpers of linalg (each also has an array rule)
    'Index': (lambda x: x[1:, T.tensor([0, 2, 0])], dict(x=x34), {}),
    'IndexAccumulate': (lambda g: T.indexing.IndexAccumulate.apply(g, (4, 4), (np.array([0, 2, 0]),), 2), dict(g=x34), {}),
    'IndexPut': (lambda x, v: x.index_copy(1, T.tensor([0, 2]), v), dict(x=x34, v=normal(3, 2)), {}),
    'Einsum': (lambda xs: T.einsum('iij,jk,k->ik', *xs), dict(x=[normal(2, 2, 3), normal(3, 4), normal(4)]), {}),
    '_MatrixTranspose': (lambda x: T.linalg._MatrixTranspose.apply(x), dict(x=x234), {}),
    '_Reshape': (lambda x: T.linalg._Reshape.apply(x, (4, 3)), dict(x=x34), {}),
    '_DiagonalEmbed': (lambda x: T.linalg._DiagonalEmbed.apply(x, 'iij', 'ij', (3, 3, 4)), dict(x=x34), {}),
    # cases for prose rules that parse, so that their not evaluating is shown, not assumed
    'Repeat': (lambda x: x.repeat(2, 1), dict(x=x34), dict(reps=(2, 1))),
    'Var': (lambda x: T.var(x, 1), dict(x=x34), dict(_reducing((1,), x34), c=1)),   # a formula since 'expand(g) * 2 * (...)'
    'LogSigmoid': (T.nn.functional.logsigmoid, dict(x=x34), {}),
    'LinearCombination': (lambda y, h, k: T.ode.LinearCombination.apply((0.5, -2.0), y, h, *k),
                          dict(y=normal(3, 4), h=np.array(0.7), k=[normal(3, 4), normal(3, 4)]), dict(c=(0.5, -2.0), sum=np.sum)),
    # chapters 22-24: layers, activations, losses (each also has an array rule; integer targets are fixed in the call)
    'LinearFunction': (lambda x, W, b: T.nn.functional.linear(x, W, b), dict(x=x234, W=normal(5, 4), b=normal(5)), {}),
    '_LinearWeightGrad': (lambda g, x: T.nn.layers._LinearWeightGrad.apply(g, x), dict(g=normal(2, 3, 5), x=x234), {}),
    'NativeDropout': (lambda x: T.nn.functional.dropout(x, 0.3, generator=T.Generator().manual_seed(0)), dict(x=x34), {}),
    'EmbeddingFunction': (lambda W: T.nn.functional.embedding(T.tensor([[1, 0, 3], [3, 3, 2]]), W, padding_idx=0),
                          dict(W=normal(5, 4)), {}),
    'EmbeddingBackward': (lambda g: T.nn.layers.EmbeddingBackward.apply(g, np.array([[1, 0, 3], [3, 3, 2]]), 5, 3),
                          dict(g=x234), {}),
    'Hardtanh': (lambda x: T.nn.functional.hardtanh(x, -0.5, 0.5), dict(x=x34), {}),
    'Hardsigmoid': (T.nn.functional.hardsigmoid, dict(x=4 * x34), {}),
    'Elu': (lambda x: (T.nn.functional.elu(x), T.nn.functional.selu(x), T.nn.functional.celu(x, 0.7)), dict(x=x34), {}),
    'Softplus': (lambda x: T.nn.functional.softplus(x, 2.0, 1.0), dict(x=x34), {}),
    'Gelu': (lambda x: (T.nn.functional.gelu(x), T.nn.functional.gelu(x, approximate='tanh')), dict(x=2 * x34), {}),
    'BinaryCrossEntropy': (lambda x, y: T.nn.functional.binary_cross_entropy(x, y, reduction='none'),
                           dict(x=RNG.uniform(0.05, 0.95, (3, 4)), y=RNG.uniform(0.0, 1.0, (3, 4))), {}),
    '_Softplus': (lambda x: T.nn.loss._Softplus.apply(x), dict(x=3 * x34), {}),
    'BinaryCrossEntropyWithLogits': (lambda x, y: (T.nn.functional.binary_cross_entropy_with_logits(x, y, reduction='none'),
                                                   T.nn.functional.binary_cross_entropy_with_logits(
                                                       x, y, pos_weight=T.tensor([0.5, 1.0, 2.0, 3.0]).to(x.dtype))),
                                     dict(x=3 * x34, y=RNG.uniform(0.0, 1.0, (3, 4))), {}),
    'NLL': (lambda z: (T.nn.functional.nll_loss(z, T.tensor([0, 2, 1])),
                       T.nn.functional.nll_loss(z, T.tensor([3, -100, 1]), weight=T.tensor([1.0, 2.0, 0.5, 4.0]).to(z.dtype),
                                                reduction='sum'),
                       T.nn.functional.nll_loss(z, T.tensor([1, 1, 0]), reduction='none')), dict(z=x34), {}),
    'CrossEntropy': (lambda x, q: (T.nn.functional.cross_entropy(x, q),
                                   T.nn.functional.cross_entropy(x, T.tensor([3, -100, 1]), label_smoothing=0.2,
                                                                 weight=T.tensor([1.0, 2.0, 0.5, 4.0]).to(x.dtype)),
                                   T.nn.functional.cross_entropy(x, T.tensor([1, 1, 0]), reduction='none')),
                     dict(x=x34, q=_softmax(normal(3, 4), 1)), {}),
    # chapters 25-28: convolution, pooling, normalization, recurrence (rules in words: PROSE_ONLY; each has an array rule)
    'Convolution': (lambda x, W, b: T.nn.functional.conv2d(x, W, b, stride=2, padding=1, groups=2),
                    dict(x=normal(2, 4, 6, 5), W=normal(6, 2, 3, 3), b=normal(6)), {}),
    'ConvTranspose': (lambda y, W, b: T.nn.functional.conv_transpose2d(y, W, b, stride=2, padding=1, output_padding=1),
                      dict(y=normal(2, 4, 3, 3), W=normal(4, 3, 3, 3), b=normal(3)), {}),
    'ConvWeight': (lambda x, g: T.nn.conv.ConvWeight.apply(x, g, T.nn.conv.ConvGeometry((5, 4), (3, 2), (3, 2), (2, 2), (1, 1), (1, 1), 1), None),
                   dict(x=normal(2, 2, 5, 4), g=normal(2, 3, 3, 2)), {}),
    'PlaneGather': (lambda x: T.nn.pooling.PlaneGather.apply(x, PLANE_IDX, 1), dict(x=normal(2, 6)), {}),
    'PlaneScatterAdd': (lambda g: T.nn.pooling.PlaneScatterAdd.apply(g, PLANE_IDX, (2, 6), 1), dict(g=normal(2, 4)), {}),
    'MaxPool': (lambda x: T.nn.functional.max_pool2d(x, 3, 2, 1), dict(x=normal(2, 3, 6, 7)), {}),
    'AvgPoolFunction': (lambda x: T.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False), dict(x=normal(2, 3, 6, 7)), {}),
    'AvgPoolTranspose': (_avg_pool_transpose, dict(g=normal(2, 3, 3, 4)), {}),
    'SeparablePool': (lambda X: T.nn.functional.adaptive_avg_pool2d(X, (3, 4)), dict(X=normal(2, 2, 5, 7)), {}),
    'Normalization': (lambda x, w, b: (T.nn.functional.batch_norm(x, None, None, w, b, training=True),   # the channel kernel
                                       T.nn.functional.group_norm(x, 3, w, b), T.nn.functional.layer_norm(x, 5),
                                       T.nn.functional.batch_norm(x, T.ones(3, dtype=x.dtype), 2 * T.ones(3, dtype=x.dtype), w, b)),
                      dict(x=normal(4, 3, 5), w=normal(3), b=normal(3)), {}),
    'LSTMSequence': (lambda x, h0, c0, *w: T.nn.recurrent.LSTMSequence.apply(x, h0, c0, *w, False),
                     dict(x=normal(3, 2, 4), h0=normal(2, 5), c0=normal(2, 5), **_rnn_weights(4)), {}),
    'RNNSequence': (lambda x, h0, *w: T.nn.recurrent.RNNSequence.apply(x, h0, *w, 'tanh', True),
                    dict(x=normal(3, 2, 4), h0=normal(2, 5), **_rnn_weights(1)), {}),
    'GRUSequence': (lambda x, h0, *w: T.nn.recurrent.GRUSequence.apply(x, h0, *w, False),
                    dict(x=normal(3, 2, 4), h0=normal(2, 5), **_rnn_weights(3)), {}),
}

# Rules whose docstring is prose, not a formula NumPy can evaluate, and why (the fix is in the report).
PROSE_ONLY = {
    'FloorDivide': "not differentiable: its backward raises, as in PyTorch",
    'ViewScatter': "'b with its view spec replaced by r' is words; spec is a recipe for a view, not an array",
    'Fill': "dv is 'g (summed to v's shape)': words; sum_to(g, v.shape) would say it",
    'ToCopy': "g.to(x.dtype) is a Tensor method; NumPy arrays have no .to",
    'MaxDim': "'g at the returned index along dim, 0 elsewhere': words",
    'MinDim': "'g at the returned index along dim, 0 elsewhere': words",
    'Kthvalue': "'g at the returned index along dim, 0 elsewhere': words",
    'MedianDim': "'g at the returned index along dim, 0 elsewhere': words",
    'Mode': "'g at the returned index along dim, 0 elsewhere': words",
    'Cumprod': "'(where x has zeros: the products of the others, without dividing)' follows the expression",
    'NormInf': "'|x|' is not an expression, and '(number of ties)' is words",
    'Prod': "', the product of the other elements of each slice' follows the expression",
    'ProdOthers': "'*d with d_e := g' is notation for replacing one argument",
    'Narrow': "'(start, n - start - length) zeros along dim' is words",
    'Repeat': "the shapes are written by example, '(r0, n0, r1, n1, ...)'",  # parses; r0, n0 are undefined
    'Split': "'cat(g_1, ..., g_k, dim) (zeros for unused pieces)': an elided argument list and words",
    'Unbind': "'stack(g_1, ..., g_n, dim) (zeros for unused slices)': an elided argument list and words",
    'Index': "index_accumulate is described in words after the expression",
    'IndexAccumulate': "the op itself is described in words before the rule",
    'IndexPut': "'x with x[key] = v;' describes the op before the rule",
    'ScatterReduce': "not differentiable: its backward raises, as in PyTorch (scatter_add is reduce='add' with a gradient)",
    'Einsum': "the subscripts are written by example, 'o,s_k (k != i)->s_i'",
    'Gelu': "two rules in one docstring (exact and 'tanh'), with Phi, phi, t, k, c undefined",
    'Elu': "a where-clause",
    'Hardsigmoid': "a where-clause",
    'Hardtanh': "a where-clause",
    'Softplus': "', and g where beta * x > threshold' follows the expression",
    'BinaryCrossEntropy': "'g (x - y)' multiplies by juxtaposition",
    'BinaryCrossEntropyWithLogits': "juxtaposition ('l sp(-x)') and an undefined sp",
    'CrossEntropy': "g has one entry per sample, so the class dim needs expand(g); 'sum(q)' leaves the dim implicit",
    'NLL': "'-g w[t] at t, 0 elsewhere': juxtaposition and words",
    'Convolution': "stated through conv_transpose and conv_weight, whose only NumPy form is the chapter's own code",
    'ConvTranspose': "stated through conv and conv_weight, whose only NumPy form is the chapter's own code",
    'ConvWeight': "stated through conv and conv_transpose, whose only NumPy form is the chapter's own code",
    'LinearFunction': "'(leading dims of x and g flattened)' and 'g summed over leading dims': words",
    'EmbeddingFunction': "a sum over positions described in words",
    'EmbeddingBackward': "indexed notation 'dg[s] = gg[idx[s]]' and words",
    'AvgPoolFunction': "'each g[o] / D[o] spread over window o': words",
    'AvgPoolTranspose': "'each g[o] / D[o] added over window o': words",
    'PlaneGather': "index notation over flattened planes, in words",
    'PlaneScatterAdd': "index notation over flattened planes, in words",
    'MaxPool': "PlaneGather's rule, in index notation over flattened planes, in words",
    'NativeDropout': "juxtaposition ('x m'), and the mask m is drawn in forward: no formula can compute it",
    'SeparablePool': "'pool(G) with the transposed matrices': words",
    'Normalization': "primes (g') and a parenthetical variant",
    'LSTMSequence': "a recurrence over time steps, in notation",
    'RNNSequence': "a recurrence over time steps, in notation",
    'GRUSequence': "a recurrence over time steps, in notation",
    'OdeintAdjoint': "the rule is an ODE solved backwards in time ('integral of a df/dtheta dt'), not a formula",
    'VJPByRecompute': "'the vjp of vjp_f, again by recomputing f': words",
}

RULES = gradient_rules()
CLASSES = _classes()
NAMES = [name for _, name, _ in RULES]


def _evaluable(rule, fn):
    """Whether every right-hand side of `rule` evaluates with NumPy: on the case for `fn`, or (without one) whether it
    parses and calls only functions NumPy is given names for."""
    formulas = rule_formulas(rule)
    if not formulas: return False
    if fn.__name__ in CASES:
        call, inputs, names = CASES[fn.__name__]
        try: check_rule(fn, call, inputs, **names)
        except (SyntaxError, TypeError, NameError, ValueError, AttributeError): return False
        return True
    known = {*formula_names, *_reducing((0,), np.zeros(1)), 'pad'}
    for f in formulas.values():
        try: tree = ast.parse(f, mode='eval')
        except SyntaxError: return False
        if any(isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in known) for n in ast.walk(tree)):
            return False
    return True


def test_the_table_is_the_whole_book():
    assert len(RULES) > 60 and len(set(NAMES)) == len(NAMES), NAMES
    modules = list(dict.fromkeys(module for module, _, _ in RULES))
    part_two = ['engine', 'creation', 'elementwise', 'reductions', 'shape', 'indexing', 'linalg']
    assert [m for m in modules if m in part_two] == part_two, f"not in book order: {modules}"
    assert modules.index('linalg') < modules.index('nn.activation') < modules.index('nn.loss'), modules


def test_prose_only_names_only_rules_that_exist():
    assert set(PROSE_ONLY) <= set(NAMES), f"not rules any more: {sorted(set(PROSE_ONLY) - set(NAMES))}"


@pytest.mark.parametrize('module,name,rule', [r for r in RULES if r[1] in PROSE_ONLY], ids=lambda r: str(r)[:40])
def test_prose_only_rules_are_not_evaluable(module, name, rule):
    "Once a docstring becomes a formula, it leaves PROSE_ONLY and gets a case."
    assert not _evaluable(rule, CLASSES[module, name]), f"{name}'s rule {rule!r} now evaluates: remove it from PROSE_ONLY and add a case"


def test_every_rule_is_checked_or_explained():
    missing = [name for name in NAMES if name not in CASES and name not in PROSE_ONLY]
    assert not missing, f"rules with neither a case nor a PROSE_ONLY reason: {missing}"


@pytest.mark.parametrize('module,name,rule', [r for r in RULES if r[1] in CASES and r[1] not in PROSE_ONLY], ids=lambda r: str(r)[:40])
def test_rule_formula_agrees_with_backward(module, name, rule):
    call, inputs, names = CASES[name]
    results = check_rule(CLASSES[module, name], call, inputs, **names)
    assert set(results) and len(results) >= len(rule_formulas(rule)) - 0, results
    for var, (formula, engine) in results.items():
        # Both sides round a few float64 operations per element (a sum over one dim at most, here <= 4 terms,
        # and exp/log within a few ulps): 64 eps relative to the size of the value leaves room without hiding
        # a wrong rule, whose error is of the size of the gradient itself.
        tol = 64 * np.finfo(np.float64).eps * (1 + np.abs(formula) + np.abs(engine))
        assert (np.abs(formula - engine) <= tol).all(), f"{name}, d{var}: {rule!r}\nformula {formula}\nbackward {engine}"


def test_a_wrong_rule_is_caught():
    "The check can fail: the log rule with its reciprocal dropped disagrees with the backward."
    results = check_rule(mytorch.elementwise.Log, mytorch.log, dict(x=p34), rule="log(x): dx = g * x")
    formula, engine = results['x']
    assert np.abs(formula - engine).max() > 0.1


# --- the backward pass on arrays -------------------------------------------------------------------------------------
# A Function may carry its rule twice: `backward`, in Tensor ops (differentiable again, used with create_graph=True),
# and `backward_numpy`, on NumPy arrays (used when the pass records nothing). The two must agree, in value and dtype.

def _both_ways(call, inputs, dtype):
    "The gradients of `call` at `inputs` (cast to dtype) through the array rules and through the Tensor rules."
    flat = [a for v in inputs.values() for a in (v if isinstance(v, list) else [v])]
    results = []
    for create_graph in (False, True):
        leaves = [mytorch.tensor(np.asarray(a, dtype=dtype), requires_grad=True) for a in flat]
        it = iter(leaves)
        args = [[next(it) for _ in v] if isinstance(v, list) else next(it) for v in inputs.values()]
        out = call(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        rng = np.random.default_rng(1)
        gs = [mytorch.tensor(rng.standard_normal(o.shape).astype(o.dtype)) for o in outs]
        got = mytorch.autograd.grad(list(outs), leaves, gs, allow_unused=True, create_graph=create_graph)
        results.append([None if g is None else g.detach().numpy() for g in got])
    return results


ARRAY_RULES = sorted(name for name in CASES if any(cls.backward_numpy is not None
                                                   for (m, n), cls in CLASSES.items() if n == name))


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('name', ARRAY_RULES)
def test_array_rule_equals_tensor_rule(name, dtype):
    call, inputs, _ = CASES[name]
    plain, graph = _both_ways(call, inputs, dtype)
    eps = np.finfo(dtype).eps
    for k, (p, g) in enumerate(zip(plain, graph)):
        assert (p is None) == (g is None), (name, k)
        if p is None: continue
        assert p.dtype == g.dtype == dtype and p.shape == g.shape, (name, k, p.dtype, g.dtype)
        # the same NumPy calls in the same order give the same bits; a rule may regroup a product or a sum, which
        # moves the result by a few roundings of the gradient's size
        assert (np.abs(p - g) <= 8 * eps * (1 + np.abs(g))).all(), (name, k, np.abs(p - g).max())


def test_array_rules_cover_the_common_ops():
    "The ops of an ordinary network backpropagate on arrays; a Function that loses its array rule fails here."
    missing = [n for n in ('Add', 'Mul', 'Expand', 'SumTo',
                           'Sub', 'Neg', 'Div', 'Exp', 'Log', 'Tanh', 'Sigmoid', 'Sqrt', 'Rsqrt', 'PowScalar', 'Pow',
                           'Relu', 'Abs', 'Clamp', 'Where', 'Maximum', 'Minimum',
                           'MatMul', 'Addmm', 'Index', 'IndexAccumulate', 'IndexPut', 'Softmax', 'LogSoftmax',
                           'LinearFunction', 'NativeDropout', 'EmbeddingFunction', 'CrossEntropy', 'NLL',
                           'BinaryCrossEntropyWithLogits', 'Gelu',
                           'Sum', 'Mean', 'Amax', 'MaxDim', 'Var', 'Std', 'LogSumExp', 'Cumsum',
                           'Convolution', 'ConvWeight', 'MaxPool', 'AvgPoolFunction', 'SeparablePool', 'Normalization',
                           'LSTMSequence', 'GRUSequence', 'RNNSequence',
                           'Reshape', 'View', 'Permute', 'Cat', 'Split', 'Stack', 'Unbind', 'Narrow', 'Pad') if n not in ARRAY_RULES]
    assert not missing, missing


@pytest.mark.parametrize('name', ARRAY_RULES)
def test_a_leaf_gradient_shares_no_storage(name):
    "The engine keeps an array rule's new result as `.grad` without a copy: never one that an input, the seed or another leaf's .grad holds."
    call, inputs, _ = CASES[name]
    flat = [a for v in inputs.values() for a in (v if isinstance(v, list) else [v])]
    leaves = [mytorch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in flat]
    it = iter(leaves)
    out = call(*[[next(it) for _ in v] if isinstance(v, list) else next(it) for v in inputs.values()])
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if o.requires_grad]
    seeds = [mytorch.tensor(np.random.default_rng(2).standard_normal(o.shape)) for o in outs]
    mytorch.autograd.backward(outs, seeds)
    held = [t.detach().numpy() for t in leaves + seeds + outs]
    grads = [t.grad.numpy() for t in leaves if t.grad is not None]
    for i, g in enumerate(grads):
        assert not any(np.shares_memory(g, h) for h in held), (name, i)
        assert not any(np.shares_memory(g, other) for j, other in enumerate(grads) if j != i), (name, i)
