"""mytorch.utils: hand-written, like mytorch/__init__.py. `mytorch.utils.data` (chapter 33_data)
is imported here so that it is reachable as an attribute, as `torch.utils.data` is."""
from . import data
