"""The examples run as a reader would run them (quick settings), and print what they claim."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(script, *args, timeout=600):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, f"{script} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_pytorch_equivalence_passes_all_fifteen_checks():
    pytest.importorskip("torch")
    out = run("pytorch_equivalence.py")
    assert "15/15 checks pass at 1e-10 in float64" in out, out
    assert "FAIL" not in out


def test_moons_demo_learns(tmp_path):
    out = run("moons_demo.py", "--quick", "--plot", str(tmp_path / "moons.png"))
    last = [l for l in out.splitlines() if l.startswith("step")][-1]
    assert float(last.split("accuracy")[1].strip().rstrip("%")) >= 80, out
    assert (tmp_path / "moons.png").stat().st_size > 10_000


def test_digits_classifier_quick_run():
    pytest.importorskip("sklearn")
    out = run("digits_classifier.py", "--quick")
    acc = float(out.strip().splitlines()[-1].split(":")[1].split("%")[0])
    assert acc > 70, out   # chance is 10%


def test_digits_cnn_quick_run():
    pytest.importorskip("sklearn")
    out = run("digits_cnn.py", "--quick")
    assert "validation accuracy" in out and "parameters" in out, out


def test_digits_cnn_compiled_equals_eager():
    "Training through mytorch.compile prints eager mode's losses and accuracies, digit for digit."
    pytest.importorskip("sklearn")
    epochs = lambda out: [l for l in out.splitlines() if l.startswith("epoch")]
    eager, compiled = run("digits_cnn.py", "--quick"), run("digits_cnn.py", "--quick", "--compile")
    assert epochs(compiled) == epochs(eager) and len(epochs(eager)) == 2, (eager, compiled)
    assert "replayed" in compiled and " 0 replayed" not in compiled, compiled


def test_tiny_transformer_quick_run():
    out = run("tiny_transformer.py", "--quick")
    tok = float(out.split("validation token accuracy ")[-1].split("%")[0])
    assert tok > 90, out


def test_char_lstm_quick_run():
    assert "exact: every character right" in run("char_lstm.py", "--quick")
