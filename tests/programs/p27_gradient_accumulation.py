# Gradient accumulation over micro-batches (loss / steps, backward each) equals one full-batch step.
# tolerance: 1e-12  (float64, a few ops)
import torch
import torch.nn as nn

def model_and_opt():
    m = nn.Linear(3, 1).double()
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[0.2, -0.4, 0.1]]))
        m.bias.fill_(0.05)
    return m, torch.optim.SGD(m.parameters(), lr=0.1)

x = torch.sin(torch.arange(24, dtype=torch.float64)).reshape(8, 3)
y = torch.cos(torch.arange(8, dtype=torch.float64)).unsqueeze(1)
full, opt = model_and_opt()
opt.zero_grad()
nn.functional.mse_loss(full(x), y).backward()
opt.step()
acc, opt = model_and_opt()
opt.zero_grad()
for xb, yb in zip(x.split(2), y.split(2)):
    (nn.functional.mse_loss(acc(xb), yb) / 4).backward()
opt.step()
print("full_weight", *full.weight.flatten().tolist())
print("accumulated_weight", *acc.weight.flatten().tolist())
print("max_diff", max((p - q).abs().max().item() for p, q in zip(full.parameters(), acc.parameters())))
