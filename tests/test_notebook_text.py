"""The book's prose survives JSON: no LaTeX command lost to an escape sequence.

A notebook is JSON, and a script that writes "\\nabla" into a JSON string unescaped turns the
`\\n` into a newline (and `\\r`, `\\t`, `\\f`, `\\b` into control characters): the page then shows
"abla" or "angle" where a symbol should be. This scans every markdown cell of every chapter.
"""
import json
import re
from pathlib import Path

import pytest

NBS = sorted(Path(__file__).resolve().parent.parent.joinpath("nbs").glob("*.ipynb"))
# What a LaTeX command looks like after its backslash and first letter were eaten by an escape:
# \nabla \neq \newline (\n), \rangle \rho \right (\r), \theta \times \tau \top (\t),
# \frac (\f), \beta \bar \bigl (\b).
EATEN = re.compile(r"\n(abla|eq|ewline)(?![a-zA-Z])|[\r\t\f\b\v\a]")


def math_spans(text):
    "The $...$ and $$...$$ spans of a markdown text (code spans removed first)."
    text = re.sub(r"`[^`]*`", "", text)
    return re.findall(r"\$\$.+?\$\$|\$[^$]+\$", text, flags=re.S)


@pytest.mark.parametrize("path", NBS, ids=lambda p: p.name)
def test_no_latex_command_lost_to_an_escape(path):
    bad = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "markdown": continue
        text = "".join(cell["source"])
        control = [repr(c) for c in "\r\t\f\b\v\a" if c in text]
        eaten = [s for s in math_spans(text) if EATEN.search(s)]
        if control or eaten: bad.append((i, control, [s[:60] for s in eaten]))
    assert not bad, f"{path.name}: markdown cells with LaTeX lost to JSON escapes: {bad}"


def test_the_check_catches_an_eaten_nabla():
    assert EATEN.search(math_spans("the gradient $\nabla_x f$ here")[0])
    assert not any(EATEN.search(s) for s in math_spans("the gradient $\\nabla_x f$ here"))


ACCIDENT = re.compile(r"Traceback \(most recent call last\)|\b\w*Warning: ")


@pytest.mark.parametrize("path", NBS, ids=lambda p: p.name)
def test_saved_outputs_hold_no_traceback_or_stray_warning(path):
    "A saved output shows a result: an error cell (a cell that raised) or a warning a cell let escape is an accident."
    bad = []
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            if out.get("output_type") == "error" or (out.get("name") == "stderr" and ACCIDENT.search(text)):
                bad.append((cell.get("id"), (out.get("ename") or text)[:120]))
    assert not bad, f"{path.name}: saved outputs with a traceback or warning: {bad}"
