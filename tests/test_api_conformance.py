"""The lists of the API conformance appendix (nbs/92_api_conformance.ipynb) point at real things.

`DEPARTURES` (deliberate differences from PyTorch's signatures, with their reasons) and `PENDING`
(differences not yet fixed) are read from the notebook's cells. The notebook itself checks that each
entry is still a difference, with PyTorch installed; these tests check, with or without it, that each
reason sends the reader to a chapter that exists, and, where PyTorch is installed, that each address
names an object in both libraries.
"""
import json
import re
from pathlib import Path

import pytest

import mytorch, mytorch.nn.functional, mytorch.optim.lr_scheduler, mytorch.utils.data  # noqa: E401

NBS = Path(__file__).resolve().parents[1] / "nbs"
NOTEBOOK = NBS / "92_api_conformance.ipynb"


def _lists() -> dict:
    "DEPARTURES and PENDING, by running the cells that define them (plain dict literals and string constants)."
    ns = {}
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and re.search(r"^(DEPARTURES|PENDING) = \{", src, re.M):
            exec("\n".join(l for l in src.splitlines() if not l.startswith("#|")), ns)
    return {name: ns[name] for name in ("DEPARTURES", "PENDING")}


LISTS = _lists()
ENTRIES = [(which, address, param, why) for which, entries in LISTS.items()
           for address, params in entries.items() for param, why in params.items()]


def _resolve(root, dotted: str):
    obj = root
    for part in dotted.split("."): obj = getattr(obj, part)
    return obj


def test_the_lists_are_found_and_not_empty():
    assert LISTS["DEPARTURES"] and all(LISTS["DEPARTURES"].values())
    assert all(LISTS["PENDING"].values()), "an address in PENDING without the parameters it covers"


@pytest.mark.parametrize("which,address,param,why", ENTRIES, ids=lambda v: v if isinstance(v, str) and "." in v else None)
def test_every_reason_names_a_chapter_that_exists(which, address, param, why):
    chapters = re.findall(r"chapter (\d+)", why)
    if which == "PENDING": assert chapters and why.startswith(f"chapter {chapters[0]}:"), why
    for n in chapters:
        assert list(NBS.glob(f"{int(n):02d}_*.ipynb")), f"{address}.{param}: {why!r} names chapter {n}, which is not in nbs/"


@pytest.mark.parametrize("address", sorted({a for _, a, _, _ in ENTRIES}))
def test_every_address_names_an_object_of_both_libraries(address):
    torch = pytest.importorskip("torch")
    import torch.nn.functional, torch.optim.lr_scheduler, torch.utils.data  # noqa: E401,F401
    assert address.startswith("torch."), address
    _resolve(torch, address[len("torch."):])
    _resolve(mytorch, address[len("torch."):])
