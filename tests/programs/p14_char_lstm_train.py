# A character-level LSTM language model trained on one repeated sentence (Embedding, LSTM, Linear, Adam).
# bound: final_loss < 0.5
# same: vocab_size n_params
import torch
import torch.nn as nn

torch.manual_seed(0)
text = "the quick brown fox jumps over the lazy dog. " * 4
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)

class CharLSTM(nn.Module):
    def __init__(self, vocab, hidden=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.lstm = nn.LSTM(16, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)
    def forward(self, idx):
        h, _ = self.lstm(self.embed(idx))
        return self.out(h)

model = CharLSTM(len(chars))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
seq = 30
for step in range(150):
    starts = torch.randint(0, len(data) - seq - 1, (8,))
    xb = torch.stack([data[s:s + seq] for s in starts.tolist()])
    yb = torch.stack([data[s + 1:s + seq + 1] for s in starts.tolist()])
    logits = model(xb)
    loss = nn.functional.cross_entropy(logits.view(-1, len(chars)), yb.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
print("vocab_size", len(chars))
print("n_params", sum(p.numel() for p in model.parameters()))
print("final_loss", loss.item())
