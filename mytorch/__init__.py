"""MyTorch: a deep-learning framework written as a book.

This file is the one hand-written module of the package (every other module is
generated from a chapter in `nbs/` by `nbdev-export`). It must not import NumPy:
`import mytorch.scalar` runs this file first and has to work with nothing installed.
The NumPy-backed names (`mytorch.tensor`, `mytorch.no_grad`, ...) are looked up on first
use by the module-level `__getattr__` below (PEP 562), which imports the tensor chapters'
modules in book order, so that every method they add to `Tensor` is in place.
"""
__version__ = "0.1.0"

from .scalar import Value
from .gradient_check import gradcheck, GradcheckError

# The modules of Part II in book order: each defines public names and adds methods to Tensor.
_TENSOR_MODULES = (
    "mytorch.engine",
    "mytorch.creation",
    "mytorch.elementwise",
    "mytorch.reductions",
    "mytorch.shape",
    "mytorch.indexing",
    "mytorch.linalg",
)
# Submodules reachable as attributes (`mytorch.kernels`) without an explicit import.
_SUBMODULES = {"kernels", "engine", "scalar", "scalar_nn", "gradient_check", "creation", "elementwise", "reductions",
               "shape", "indexing", "linalg", "autograd", "utils", "datasets", "nn", "optim"}


def _load_tensor_modules():
    import importlib
    return [importlib.import_module(m) for m in _TENSOR_MODULES]


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib
    if name in _SUBMODULES:
        return importlib.import_module(f"mytorch.{name}")
    modules = _load_tensor_modules()
    aliases = modules[0].dtype_aliases
    if name in aliases:
        obj = aliases[name]
    else:
        for mod in reversed(modules):
            if name in getattr(mod, "__all__", ()):
                obj = getattr(mod, name)
                break
        else:
            raise AttributeError(f"module 'mytorch' has no attribute {name!r}")
    globals()[name] = obj
    return obj


def __dir__():
    names = set(globals())
    for m in _TENSOR_MODULES:
        import importlib
        names.update(getattr(importlib.import_module(m), "__all__", ()))
    return sorted(names)
