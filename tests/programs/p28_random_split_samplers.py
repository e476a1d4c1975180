# A Dataset subclass, random_split with a seeded generator, a DataLoader with drop_last and a custom collate_fn.
# bound: val_loss < 0.1
# same: train_len val_len n_batches last_batch distinct_train
import torch
from torch.utils.data import Dataset, DataLoader, random_split

class Squares(Dataset):
    def __init__(self, n):
        self.x = torch.linspace(-1, 1, n)
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.x[i] ** 2}

def collate(items):
    return torch.stack([it["x"] for it in items]).unsqueeze(1), torch.stack([it["y"] for it in items]).unsqueeze(1)

torch.manual_seed(1)
train, val = random_split(Squares(100), [80, 20], generator=torch.Generator().manual_seed(0))
loader = DataLoader(train, batch_size=16, shuffle=True, drop_last=True, collate_fn=collate)
model = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(60):
    n_batches = 0
    for xb, yb in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
        n_batches += 1
xv, yv = collate([val[i] for i in range(len(val))])
with torch.no_grad():
    val_loss = torch.nn.functional.mse_loss(model(xv), yv).item()
print("train_len", len(train))
print("val_len", len(val))
print("n_batches", n_batches)
print("last_batch", xb.shape[0])
print("distinct_train", len(set(train.indices) | set(val.indices)))
print("val_loss", val_loss)
