"""A character-level LSTM that learns to reproduce a sentence, printing greedy samples as it trains.

    python examples/char_lstm.py                 # 300 Adam steps; prints samples and the reproduced text
    python examples/char_lstm.py --quick         # 100 steps (CI)
    python examples/char_lstm.py --text "hello, recurrent world"

The model reads the sentence one character at a time (an embedding, a one-layer LSTM and a
linear read-out) and is trained, with teacher forcing, to predict each next character. A greedy
sample starts from the first character and feeds each prediction back in, carrying the LSTM's
state (h, c) from step to step, exactly as one decodes with PyTorch's nn.LSTM. The default
sentence repeats "the quick" and "the lazy dog" with different continuations, so the state must
remember more than the last few characters; early samples mix the two contexts up. Exits with
status 1 if the text is not reproduced exactly. Written as a PyTorch user would
write it, with `mytorch` imported instead.
"""
import argparse
import sys
import time

import mytorch
import mytorch.nn as nn
import mytorch.nn.functional as F
import mytorch.optim as optim
from mytorch.nn.recurrent import LSTM

SENTENCE = "the quick brown fox jumps over the lazy dog, and the lazy dog sleeps while the quick fox runs."


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, embedding_dim=16, hidden_size=64, generator=None):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embedding_dim, generator=generator)
        self.lstm = LSTM(embedding_dim, hidden_size, batch_first=True, generator=generator)
        self.head = nn.Linear(hidden_size, vocab_size, generator=generator)

    def forward(self, ids, state=None):
        "ids (batch, seq) -> scores (batch, seq, vocab), and the LSTM's final (h, c)."
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


def greedy_sample(model, first_id, length):
    "Start from `first_id` and feed back the most likely next character `length - 1` times."
    ids, state = [first_id], None
    with mytorch.no_grad():
        for _ in range(length - 1):
            scores, state = model(mytorch.tensor([[ids[-1]]]), state)   # one step, the state carried over
            ids.append(int(scores[0, -1].argmax().item()))
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--text", default=SENTENCE, help="the sentence to learn")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="100 steps, for CI")
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick: args.steps = 100
    if len(args.text) < 2: ap.error("--text needs at least two characters")
    vocab = sorted(set(args.text))
    to_id = {ch: i for i, ch in enumerate(vocab)}
    decode = lambda ids: ''.join(vocab[i] for i in ids)
    ids = mytorch.tensor([[to_id[ch] for ch in args.text]])
    inputs, targets = ids[:, :-1], ids[:, 1:]          # predict character t+1 from characters 0..t

    mytorch.manual_seed(args.seed)
    model = CharLSTM(len(vocab), generator=mytorch.Generator().manual_seed(args.seed))
    opt = optim.Adam(model.parameters(), lr=args.lr)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{len(args.text)} characters, {len(vocab)} distinct; embedding 16, LSTM hidden 64, {n_params:,} parameters, "
          f"{args.steps} Adam steps (lr {args.lr})")
    every = max(1, args.steps // 12)
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        scores, _ = model(inputs)
        loss = F.cross_entropy(scores.reshape(-1, len(vocab)), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == args.steps:
            sample = decode(greedy_sample(model, to_id[args.text[0]], len(args.text)))
            print(f"step {step:4d}  loss {loss.item():.4f}  {sample!r}")
    text = decode(greedy_sample(model, to_id[args.text[0]], len(args.text)))
    first_wrong = next((i for i, (a, b) in enumerate(zip(text, args.text)) if a != b), None)
    print(f"\nreproduced after {args.steps} steps ({time.perf_counter() - t0:.1f} s): {text!r}")
    if first_wrong is None: print("exact: every character right")
    else: print(f"not yet exact: first wrong character at position {first_wrong} "
                f"({text[first_wrong]!r} instead of {args.text[first_wrong]!r})")
    return text == args.text


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
