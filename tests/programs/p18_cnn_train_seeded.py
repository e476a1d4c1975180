# A seeded CNN trained to tell horizontal from vertical bars (Conv2d, BatchNorm2d, AdaptiveAvgPool2d, Adam).
# bound: final_loss < 0.2
# bound: accuracy > 0.95
# same: n_params
import torch
import torch.nn as nn

torch.manual_seed(0)
def bars(n):
    x = torch.randn(n, 1, 8, 8) * 0.3
    y = torch.randint(0, 2, (n,))
    pos = torch.randint(0, 8, (n,))
    for i in range(n):
        if y[i] == 0: x[i, 0, pos[i], :] += 1.0
        else: x[i, 0, :, pos[i]] += 1.0
    return x, y

x, y = bars(128)
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
model.train()
for epoch in range(60):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
model.eval()
with torch.no_grad():
    xt, yt = bars(128)
    accuracy = (model(xt).argmax(1) == yt).float().mean().item()
print("n_params", sum(p.numel() for p in model.parameters() if p.requires_grad))
print("final_loss", loss.item())
print("accuracy", accuracy)
