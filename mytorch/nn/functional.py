"""mytorch.nn.functional: the functional forms of the ops and layers, at PyTorch's address.

Hand-written, like mytorch/__init__.py. Each chapter exports its functional forms (lowercase
names) in its own module; this file collects them, in book order, so that
`import mytorch.nn.functional as F` then `F.relu`, `F.cross_entropy`, `F.linear`, `F.pad`, ...
work as in PyTorch. A later chapter's function wins over an earlier one of the same name.
"""
import importlib as _importlib

_SOURCES = (
    ("mytorch.elementwise", ("relu", "sigmoid", "tanh")),
    ("mytorch.linalg", ("softmax", "log_softmax")),
    ("mytorch.shape", ("pad",)),
    ("mytorch.nn.layers", None),
    ("mytorch.nn.activation", None),
    ("mytorch.nn.loss", None),
    ("mytorch.nn.conv", ("conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d")),
    ("mytorch.nn.pooling", None),
    ("mytorch.nn.normalization", None),
    ("mytorch.nn.attention", ("scaled_dot_product_attention",)),
)

for _modname, _names in _SOURCES:
    _mod = _importlib.import_module(_modname)
    for _name in (_names or [n for n in getattr(_mod, "__all__", ()) if n[:1].islower()]):
        globals()[_name] = getattr(_mod, _name)

__all__ = sorted(n for n in globals() if not n.startswith("_"))
del _modname, _names, _mod, _name
