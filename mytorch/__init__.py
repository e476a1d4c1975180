"""A deep-learning framework written as a book: PyTorch's API, derived and tested from scratch.

Modules:

- `mytorch.nn.functional`: mytorch.nn.functional: the functional forms of the ops and layers, at PyTorch's address."""

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
               "shape", "indexing", "linalg", "autograd", "utils", "datasets", "nn", "optim",
               "serialization", "training", "diagnostics", "viz", "widgets"}
# Top-level names from modules outside Part II, as in PyTorch (torch.save / torch.load).
_OTHER_NAMES = {"save": "mytorch.serialization", "load": "mytorch.serialization", "erf": "mytorch.nn.activation"}


def _load_tensor_modules():
    import importlib
    return [importlib.import_module(m) for m in _TENSOR_MODULES]


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib
    if name in _SUBMODULES:
        return importlib.import_module(f"mytorch.{name}")
    if name in _OTHER_NAMES:
        obj = globals()[name] = getattr(importlib.import_module(_OTHER_NAMES[name]), name)
        return obj
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
