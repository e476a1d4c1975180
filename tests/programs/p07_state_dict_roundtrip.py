# Checkpoint model and optimizer with torch.save / torch.load to a buffer, resume, and continue identically.
# tolerance: 0  (the resumed run must equal the uninterrupted one exactly)
import io
import torch
import torch.nn as nn

torch.manual_seed(0)
def make():
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
model = make()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 3), torch.randint(0, 2, (32,))
loss_fn = nn.CrossEntropyLoss()
def train(model, optimizer, steps):
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()
train(model, optimizer, 5)
buffer = io.BytesIO()
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 5}, buffer)
buffer.seek(0)
ckpt = torch.load(buffer)
model2 = make()
model2.load_state_dict(ckpt["model"])
optimizer2 = torch.optim.Adam(model2.parameters(), lr=1e-2)
optimizer2.load_state_dict(ckpt["optimizer"])
a, b = train(model, optimizer, 5), train(model2, optimizer2, 5)
diff = max((p - q).abs().max().item() for p, q in zip(model.parameters(), model2.parameters()))
print("loss_diff", abs(a - b))
print("param_diff", diff)
print("epoch", ckpt["epoch"])
print("keys", len(ckpt["model"]), len(ckpt["optimizer"]["state"]))
print("step", float(optimizer2.state_dict()["state"][0]["step"]))
