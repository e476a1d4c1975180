"""The digits CNN of examples/digits_cnn.py, trained data-parallel: each rank reads its own shard of every epoch
(DistributedSampler) and DistributedDataParallel averages the gradients, so all ranks keep the same weights.

    mpiexec -n 2 python examples/ddp_digits.py            # 15 epochs on 2 processes
    mpiexec -n 2 python examples/ddp_digits.py --quick    # 2 epochs on part of the data (CI)
    python examples/ddp_digits.py --quick                 # without mpiexec: a group of one process

As root, Open MPI also wants `--allow-run-as-root` (and `--oversubscribe` for more ranks than cores);
`mytorch.distributed.mpiexec_command(2, "examples/ddp_digits.py")` prints the whole command line. Needs mpi4py and
an MPI (`pip install "mytorch[distributed]"`) and scikit-learn for the data set (`pip install "mytorch[examples]"`).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
import mytorch.distributed as dist
from mytorch.datasets import load_digits
from mytorch.nn.parallel import DistributedDataParallel
from mytorch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset, random_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
from digits_cnn import accuracy, make_model   # the same network and evaluation as the one-process example


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="2 epochs on 600 training images, for CI")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch-size", type=int, default=32, help="the global batch, split evenly over the ranks")
    args = ap.parse_args(argv)
    if dist.started_by_mpiexec(): dist.init_process_group("mpi")
    else: dist.init_process_group("mpi", world_size=1, rank=0)
    rank, world = dist.get_rank(), dist.get_world_size()
    say = print if rank == 0 else (lambda *a, **k: None)
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} does not split evenly over {world} ranks")

    X, y = load_digits()
    data = TensorDataset((X / 16.0).reshape(-1, 1, 8, 8), y)
    train, val = random_split(data, [0.8, 0.2], generator=mytorch.Generator().manual_seed(args.seed))
    if args.quick: train, args.epochs = Subset(train, range(600)), 2
    sampler = DistributedSampler(train, seed=args.seed)   # num_replicas and rank from the process group
    train_loader = DataLoader(train, batch_size=args.batch_size // world, sampler=sampler)
    val_loader = DataLoader(val, batch_size=256)
    model = DistributedDataParallel(make_model(mytorch.Generator().manual_seed(args.seed + rank)))   # rank 0's start wins
    opt = optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    n_params = sum(p.numel() for p in model.parameters())
    say(f"digits on {world} rank(s): {len(train)} train / {len(val)} validation images, {len(sampler)} per rank and "
        f"epoch, global batch {args.batch_size}, CNN with {n_params:,} parameters")
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)   # a new shuffle each epoch, the same on every rank
        total = mytorch.zeros(2, dtype=mytorch.float64)
        for x, t in train_loader:
            loss = loss_fn(model(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += mytorch.tensor([loss.item() * len(t), len(t)], dtype=mytorch.float64)
        dist.all_reduce(total)   # the epoch's mean loss over every rank's samples
        say(f"epoch {epoch + 1}: train loss {(total[0] / total[1]).item():.4f}, "
            f"validation accuracy {accuracy(model.module, val_loader):.1%}")
    seconds = time.perf_counter() - t0
    flat = mytorch.tensor(np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]).astype(np.float64))
    everyone = [mytorch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    same = all(np.array_equal(e.numpy(), flat.numpy()) for e in everyone)
    acc = accuracy(model.module, val_loader)
    say(f"validation accuracy after {args.epochs} epoch(s): {acc:.1%} on {world} rank(s) in {seconds:.1f} s; "
        f"parameters identical on all ranks: {same}")
    dist.destroy_process_group()
    return acc, same


if __name__ == "__main__":
    main()
