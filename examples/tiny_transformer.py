"""A two-layer Transformer encoder that learns to reverse sequences of digits of varying length.

    python examples/tiny_transformer.py            # 600 Adam steps (cosine schedule), prints accuracy as it trains
    python examples/tiny_transformer.py --quick    # 250 steps (CI)

Each example is 4 to 12 random digits, padded to 12 with a PAD token; the target at position i
is digit (length - 1 - i), so the model must find where its own sequence ends (through
attention, since the padding is masked out with src_key_padding_mask) and fetch the digit
mirrored around its middle. Token accuracy counts the real positions; sequence accuracy counts
sequences reversed without a single mistake. Written as a PyTorch user would write it.
"""
import argparse
import time

import numpy as np

import mytorch
import mytorch.nn as nn
import mytorch.nn.functional as F
import mytorch.optim as optim
from mytorch.nn.attention import TransformerEncoder, TransformerEncoderLayer
from mytorch.nn.normalization import LayerNorm

MAX_LEN, MIN_LEN, DIGITS = 12, 4, 10
PAD, IGNORE = DIGITS, -100          # the padding token; the target that cross_entropy skips


def make_batch(n, generator):
    "n padded digit sequences (inputs) and their reversals (targets, IGNORE at padding)."
    digits = mytorch.randint(0, DIGITS, (n, MAX_LEN), generator=generator).numpy()
    lengths = mytorch.randint(MIN_LEN, MAX_LEN + 1, (n, 1), generator=generator).numpy()
    pos = np.arange(MAX_LEN)
    padding = pos >= lengths
    mirrored = np.take_along_axis(digits, np.clip(lengths - 1 - pos, 0, None), axis=1)
    return mytorch.tensor(np.where(padding, PAD, digits)), mytorch.tensor(np.where(padding, IGNORE, mirrored))


class Reverser(nn.Module):
    def __init__(self, d_model=48, nhead=4, dim_feedforward=96, num_layers=2):
        super().__init__()
        self.tokens = nn.Embedding(DIGITS + 1, d_model)
        self.positions = nn.Embedding(MAX_LEN, d_model)
        layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = TransformerEncoder(layer, num_layers, norm=LayerNorm(d_model))
        self.head = nn.Linear(d_model, DIGITS)

    def forward(self, x):
        h = self.tokens(x) + self.positions(mytorch.arange(x.shape[1]))
        return self.head(self.encoder(h, src_key_padding_mask=(x == PAD)))


def accuracy(model, x, y):
    "(token accuracy over real positions, fraction of sequences reversed exactly)."
    with mytorch.no_grad():
        pred = model(x).argmax(-1).numpy()
    target = y.numpy()
    real = target != IGNORE
    right = pred == target
    return float(right[real].mean()), float((right | ~real).all(1).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--quick", action="store_true", help="250 steps, for CI")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick: args.steps = 250
    every = 50 if args.steps <= 300 else 100
    mytorch.manual_seed(args.seed)
    model = Reverser()
    opt = optim.Adam(model.parameters(), lr=args.lr)
    schedule = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)   # settles the weights at the end
    data = mytorch.Generator().manual_seed(args.seed + 1)
    x_val, y_val = make_batch(1000, mytorch.Generator().manual_seed(12345))   # fixed, never trained on
    n_params = sum(p.numel() for p in model.parameters())
    print(f"reverse {MIN_LEN}-{MAX_LEN} digits: 2-layer pre-norm Transformer encoder, {n_params:,} parameters, "
          f"{args.steps} steps of {args.batch_size}")
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = make_batch(args.batch_size, data)
        loss = F.cross_entropy(model(x).reshape(-1, DIGITS), y.reshape(-1), ignore_index=IGNORE)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        if step % every == 0 or step == args.steps:
            tok, seq = accuracy(model, x_val, y_val)
            print(f"step {step:4d}: loss {loss.item():.4f}, validation token accuracy {tok:.1%}, "
                  f"sequences exactly reversed {seq:.1%} ({time.perf_counter() - t0:.1f} s)")
    x, y = make_batch(1, mytorch.Generator().manual_seed(7))
    n = int((x != PAD).sum().item())
    print(f"example: {x[0, :n].tolist()} -> {model(x).argmax(-1)[0, :n].tolist()}")
    return tok, seq


if __name__ == "__main__":
    main()
