"""MyTorch: a deep-learning framework written as a book.

This file is the one hand-written module of the package (every other module is
generated from a chapter in `nbs/` by `nbdev-export`). It must not import NumPy:
`import mytorch.scalar` runs this file first and has to work with nothing installed.
NumPy-backed names are added to `_LAZY` as their chapters land and are imported on
first use through the module-level `__getattr__` below (PEP 562).
"""
__version__ = "0.1.0"

from .scalar import Value
from .gradient_check import gradcheck, GradcheckError

# name -> module that defines it; imported on first attribute access
_LAZY = {
    "kernels": "mytorch.kernels",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        mod = importlib.import_module(_LAZY[name])
        obj = mod if mod.__name__.endswith("." + name) else getattr(mod, name)
        globals()[name] = obj
        return obj
    raise AttributeError(f"module 'mytorch' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
