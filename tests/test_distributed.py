"""mytorch.distributed, DistributedDataParallel and DistributedSampler: the 2-rank programs run under mpiexec (as a
reader would start them), the one-process rules in this process, and the sampler against PyTorch's."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mytorch
import mytorch.distributed as dist
from mytorch.utils.data import DistributedSampler

ROOT = Path(__file__).resolve().parents[1]
MPI = ROOT / "tests" / "mpi"
needs_mpi = pytest.mark.skipif(not dist.is_available(), reason="mpi4py is not installed (pip install 'mytorch[distributed]')")


def ranks_json(nprocs, *argv, timeout=240):
    "Run `python *argv` on `nprocs` ranks; each rank's last JSON line, by rank."
    r = dist.launch(nprocs, *argv, timeout=timeout, check=False)
    assert r.returncode == 0, f"mpiexec -n {nprocs} {' '.join(argv)} failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert sorted(row["rank"] for row in rows) == list(range(nprocs)), r.stdout
    return sorted(rows, key=lambda row: row["rank"])


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 3])
def test_collectives_on_every_rank(nprocs):
    for row in ranks_json(nprocs, str(MPI / "collectives.py")):
        assert row == {"rank": row["rank"], "world_size": nprocs, "all_reduce_cases": 20, "ok": True}


@needs_mpi
def test_ddp_on_shards_equals_one_process_on_the_batch():
    rows = ranks_json(2, str(MPI / "ddp_equivalence.py"))
    for row in rows:
        for case in ("mlp-sgd", "mlp-adam", "cnn-sgd", "cnn-adam", "mlp-adam accumulated (no_sync)", "cnn-sgd small buckets"):
            assert row[case] <= 1e-12, (case, row)
        for case in ("mlp-sgd", "mlp-adam", "cnn-sgd", "cnn-adam"):
            assert row[f"{case} ranks equal"] is True, (case, row)   # bit for bit, not just close
        assert row["cnn small buckets"] >= 4 and row["mlp buckets"] == 1
        assert row["mlp-sgd never synced"] > 1e-3   # the control: the test fails when gradients are not averaged
        assert row["state_dict keys"] == ["module.0.weight", "module.0.bias"]


@needs_mpi
def test_ddp_digits_example_quick():
    r = dist.launch(2, str(ROOT / "examples" / "ddp_digits.py"), "--quick", timeout=240, check=False)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    last = r.stdout.strip().splitlines()[-1]
    assert "on 2 rank(s)" in last and "parameters identical on all ranks: True" in last, r.stdout
    assert float(last.split("accuracy after 2 epoch(s): ")[1].split("%")[0]) >= 70, r.stdout


ONE_PROCESS = r"""
import numpy as np, mytorch, mytorch.nn as nn
import mytorch.distributed as dist
from mytorch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group(world_size=1, rank=0)
assert (dist.get_rank(), dist.get_world_size(), dist.is_initialized()) == (0, 1, True)
t = mytorch.tensor([1.0, 2.0]); dist.all_reduce(t, op=dist.ReduceOp.AVG); assert t.tolist() == [1.0, 2.0]
class Two(nn.Module):
    def __init__(self):
        super().__init__(); self.used, self.unused = nn.Linear(2, 1), nn.Linear(2, 1)
    def forward(self, x): return self.used(x)
m = DDP(Two()); m(mytorch.ones(3, 2)).sum().backward()
try:
    m(mytorch.ones(3, 2)); raise AssertionError("an unused parameter went unnoticed")
except RuntimeError as e: assert "unused.weight, unused.bias" in str(e) and "prior iteration" in str(e), e
lin = nn.Linear(3, 2); ddp = DDP(lin); x = mytorch.randn(4, 3)
ddp(x).pow(2).sum().backward(); g = lin.weight.grad.numpy().copy(); lin.zero_grad()
lin(x).pow(2).sum().backward()
assert np.array_equal(g, lin.weight.grad.numpy())   # one rank: DDP is the module itself
dist.destroy_process_group(); print("ok")
"""


@needs_mpi
def test_one_process_group_and_ddp_of_one_rank():
    r = subprocess.run([sys.executable, "-c", ONE_PROCESS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@needs_mpi
def test_errors_without_mpiexec(monkeypatch):
    for v in dist._LAUNCHER_VARS: monkeypatch.delenv(v, raising=False)
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"): dist.get_rank()
    with pytest.raises(RuntimeError, match="not started by mpiexec"): dist.init_process_group("mpi")
    with pytest.raises(ValueError, match="MPI alone"): dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="Default process group has not been initialized"): DistributedSampler(range(4))
    cmd = dist.mpiexec_command(2, "train.py")
    assert cmd[1:3] == ["-n", "2"] and cmd[-2:] == [sys.executable, "train.py"]


def test_missing_mpi4py_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)   # as if it were not installed
    with pytest.raises(RuntimeError, match=r'pip install "mytorch\[distributed\]"'): dist._mpi()


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 70), replicas=st.integers(1, 9), data=st.data(), shuffle=st.booleans(),
       seed=st.integers(-2**40, 2**40), drop_last=st.booleans(), epoch=st.integers(0, 1000))
def test_distributed_sampler_matches_torch(n, replicas, data, shuffle, seed, drop_last, epoch):
    tud = pytest.importorskip("torch.utils.data")
    rank = data.draw(st.integers(0, replicas - 1))
    mine = DistributedSampler(range(n), replicas, rank, shuffle, seed, drop_last)
    theirs = tud.DistributedSampler(range(n), replicas, rank, shuffle, seed, drop_last)
    mine.set_epoch(epoch); theirs.set_epoch(epoch)
    assert (list(mine), len(mine)) == (list(theirs), len(theirs))
