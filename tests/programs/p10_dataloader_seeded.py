# Logistic regression fed by a DataLoader over a TensorDataset, shuffled by a seeded generator.
# bound: final_loss < 0.25
# bound: accuracy > 0.9
# same: batches_per_epoch last_batch_size n_samples
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
n = 200
x = torch.randn(n, 2)
y = (x[:, 0] + 2 * x[:, 1] > 0).float()
dataset = TensorDataset(x, y)
g = torch.Generator()
g.manual_seed(42)
loader = DataLoader(dataset, batch_size=32, shuffle=True, generator=g)
model = nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
loss_fn = nn.BCEWithLogitsLoss()
for epoch in range(20):
    batches = 0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(xb).squeeze(1), yb)
        loss.backward()
        optimizer.step()
        batches += 1
with torch.no_grad():
    logits = model(x).squeeze(1)
    full_loss = loss_fn(logits, y)
    accuracy = ((logits > 0).float() == y).float().mean()
print("batches_per_epoch", batches)
print("last_batch_size", len(xb))
print("n_samples", len(dataset))
print("final_loss", full_loss.item())
print("accuracy", accuracy.item())
