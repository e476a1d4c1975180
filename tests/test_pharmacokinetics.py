"""examples/pharmacokinetics.py --quick, as CI runs it: Vmax and Km are recovered within 10% from a wrong start,
the low-dose fit shows that only Vmax/Km is identifiable there, and the invariant checks pass for the laws that
have the properties and fail for the one that does not."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pharmacokinetics_quick_recovers_vmax_and_km():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "pharmacokinetics.py"), "--quick"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    out = r.stdout
    assert r.returncode == 0, f"pharmacokinetics.py failed:\n{out}\n{r.stderr}"
    m = re.search(r"recovered: Vmax ([\d.]+) \(true ([\d.]+)\), Km ([\d.]+) \(true ([\d.]+)\)", out)
    assert m, out
    vmax, vmax_true, km, km_true = map(float, m.groups())
    assert abs(vmax / vmax_true - 1) < 0.10 and abs(km / km_true - 1) < 0.10, out
    low = re.search(r"Vmax/Km ([\d.]+) \(true ([\d.]+)\); correlation ([+-][\d.]+)", out)
    ratio, ratio_true, corr = map(float, low.groups())
    assert abs(ratio / ratio_true - 1) < 0.05 and corr > 0.99, out
    assert "check_invariants(michaelis_menten)" in out and "FAIL" in out.split("check_invariants(slope of substrate_inhibition)")[1], out
    learned = out.split("Invariants of the elimination laws")[1].split("check_invariants(michaelis_menten)")[0]
    assert "FAIL" not in learned, out
