"""A deep-learning framework written as a book: PyTorch's API, derived and tested from scratch.

Modules:

- `mytorch.compiler`: `mytorch.compiler`: `mytorch.lower` records a function once and lowers its forward and backward to a flat list of NumPy calls over numbered, pooled buffers; `mytorch.compile`, PyTorch's name and calling convention, replays that tape while guards hold and falls back to eager mode where Python depends on a tensor's values.
- `mytorch.nn.functional`: mytorch.nn.functional: the functional forms of the ops and layers, at PyTorch's address."""

__version__ = "0.1.0"

from types import ModuleType as _ModuleType
from .scalar import Value
from .gradient_check import gradcheck, GradcheckError

try:
    import numpy as _numpy
except ImportError as _e:   # Part I still works; __getattr__ below explains what is missing
    _numpy_missing = _e
else:
    _numpy_missing = None
    # Part II, in book order: each chapter adds its functions here and its methods to Tensor.
    from .engine import *
    from .creation import *
    from .elementwise import *
    from .reductions import *
    from .shape import *
    from .indexing import *
    from .linalg import *
    globals().update(dtype_aliases)   # mytorch.float, mytorch.double, mytorch.long, ... as in torch
    # What `import torch` loads too: torch.nn, torch.optim, torch.autograd (with its functional
    # and forward_ad), torch.utils.data. `from . import x` binds only the submodule's own name.
    from . import autograd, nn, optim, utils
    from .autograd import functional as _, forward_ad as _, graph as _
    from .nn.activation import erf   # torch.erf; its rule is derived with the other activations
    from .gradient_check import gradgradcheck, jvpcheck
    from .autograd.forward_ad import dual_level, make_dual, unpack_dual, UnpackedDual
    del _

# Names whose modules load on first use (Parts V-VII), as `mytorch.save` does.
_LAZY = {"save": "serialization", "load": "serialization", "compile": "compiler", "lower": "compiler",
         "check_invariants": "invariants", "odeint": "ode", "odeint_adjoint": "ode"}

# The public names: what the imports above bound, less the submodules (as in torch.__all__),
# plus the two that load on first use.
__all__ = [_n for _n, _v in globals().items() if not _n.startswith("_") and not isinstance(_v, _ModuleType)]
__all__ += list(_LAZY) if _numpy_missing is None else []


def __getattr__(name):
    "Load what `import mytorch` leaves for first use: `mytorch.save`/`load`, `compile`, ... and the optional submodules."
    if name in _LAZY:   # torch.save, torch.load, torch.compile, ...
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    if not name.startswith("_"):
        import importlib
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}": raise
    if _numpy_missing is not None:
        raise AttributeError(f"mytorch.{name} is not available: the tensor engine needs NumPy, which did not import "
                             f"({_numpy_missing}). Install it with `pip install numpy`; without it, mytorch offers "
                             f"only the scalar engine (mytorch.Value, mytorch.gradcheck).")
    raise AttributeError(f"module 'mytorch' has no attribute {name!r}")


def __dir__():
    import pkgutil
    lazy = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return sorted({*globals(), *__all__, *lazy})
