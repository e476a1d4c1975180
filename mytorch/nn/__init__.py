"""mytorch.nn: layers, activations, losses and the Module they are built from.

Hand-written, like mytorch/__init__.py: the chapters of Part III export their own modules
(`mytorch.nn.module`, `mytorch.nn.layers`, ...), and this file gives their public classes
PyTorch's addresses (`nn.Module`, `nn.Linear`, ...), looked up on first use. Submodules
(`nn.functional`, `nn.init`, `nn.utils`) are imported on first use too.
"""
import importlib

# The modules of Part III in book order; a later chapter's name wins over an earlier one's.
_NN_MODULES = (
    "mytorch.nn.module",
    "mytorch.nn.layers",
    "mytorch.nn.activation",
    "mytorch.nn.loss",
    "mytorch.nn.conv",
    "mytorch.nn.pooling",
    "mytorch.nn.normalization",
    "mytorch.nn.recurrent",
    "mytorch.nn.attention",
)
_SUBMODULES = {"module", "functional", "init", "utils", "layers", "activation", "loss", "conv", "pooling", "normalization",
               "recurrent", "attention"}


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _SUBMODULES:
        return importlib.import_module(f"mytorch.nn.{name}")
    for modname in reversed(_NN_MODULES):
        mod = importlib.import_module(modname)
        if name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            globals()[name] = obj
            return obj
    raise AttributeError(f"module 'mytorch.nn' has no attribute {name!r}")


def __dir__():
    names = set(globals()) | _SUBMODULES
    for m in _NN_MODULES:
        names.update(getattr(importlib.import_module(m), "__all__", ()))
    return sorted(names)
