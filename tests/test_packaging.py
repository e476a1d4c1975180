"""Packaging gates: the wheel stays small, depends on NumPy alone, and the scalar engine
imports on a Python with nothing installed."""
import json
import math
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    "Build the sdist, then the wheel from the sdist, as `python -m build` does."
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True)
    wheels, sdists = list(out.glob("mytorch-*.whl")), list(out.glob("mytorch-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return wheels[0], sdists[0]


def test_wheel_is_under_one_megabyte(dists):
    wheel, _ = dists
    size = wheel.stat().st_size
    assert size < 1_000_000, f"{wheel.name} is {size:,} bytes; the limit is 1 MB"


def test_wheel_contains_the_package_and_not_the_book(dists):
    wheel, _ = dists
    names = zipfile.ZipFile(wheel).namelist()
    assert "mytorch/__init__.py" in names and "mytorch/scalar.py" in names
    assert not any(n.startswith(("nbs/", "tests/", "docs/")) for n in names), names


def test_sdist_carries_the_kernel_sources(dists):
    _, sdist = dists
    names = tarfile.open(sdist).getnames()
    root = names[0].split("/")[0]
    for required in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        assert f"{root}/{required}" in names, f"{required} missing from {sdist.name}"
    assert any(n.startswith(f"{root}/kernels/") and n.endswith(".pyx") for n in names), names


def test_wheel_requires_numpy_only(dists):
    wheel, _ = dists
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    lines = zipfile.ZipFile(wheel).read(meta).decode().splitlines()
    runtime = [l for l in lines if l.startswith("Requires-Dist:") and "extra ==" not in l]
    assert [r.split(":", 1)[1].strip().split(">")[0].split("=")[0].split("<")[0].strip() for r in runtime] == ["numpy"], runtime


def test_installing_the_wheel_pulls_in_nothing_but_numpy(dists, tmp_path):
    "Ask pip what a fresh install would bring (resolving against the index, installing nothing)."
    wheel, _ = dists
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                    "--report", str(report), str(wheel)], check=True, capture_output=True, text=True)
    names = sorted(item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"])
    assert names == ["mytorch", "numpy"], names


def _bare_python(code, path):
    "Run `code` in an interpreter with no site-packages (-S) and no environment (-I), `path` first on sys.path."
    base = getattr(sys, "_base_executable", sys.executable)
    prog = f"import sys; sys.path.insert(0, {str(path)!r}); " + code
    return subprocess.run([base, "-I", "-S", "-c", prog], capture_output=True, text=True)


def test_scalar_engine_imports_with_nothing_installed(dists, tmp_path):
    wheel, _ = dists
    zipfile.ZipFile(wheel).extractall(tmp_path)
    code = ("import mytorch.scalar, mytorch; "
            "assert 'numpy' not in sys.modules, 'numpy was imported'; "
            "from mytorch import Value, gradcheck; "
            "x, y = Value(-2.0), Value(3.0); z = (x * y + y.tanh()).sigmoid(); z.backward(); "
            "assert gradcheck(lambda a: a.tanh() * a, [Value(0.3)]); "
            "print(repr(x.grad))")
    r = _bare_python(code, tmp_path)
    assert r.returncode == 0, r.stderr
    s = 1 / (1 + math.exp(6 - math.tanh(3)))   # sigmoid(x*y + tanh(y)) at x=-2, y=3
    assert abs(float(r.stdout) - 3 * s * (1 - s)) < 1e-15, r.stdout


def test_bare_python_really_has_no_numpy(tmp_path):
    "The gate above means something only if the bare interpreter cannot import NumPy."
    r = _bare_python("import numpy", tmp_path)
    assert r.returncode != 0 and "No module named 'numpy'" in r.stderr
