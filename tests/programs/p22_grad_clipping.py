# Gradient clipping by norm and by value between backward and step; the returned total norm.
# tolerance: 1e-12  (float64, a few ops)
import torch
import torch.nn as nn

lin = nn.Linear(4, 2).double()
with torch.no_grad():
    lin.weight.copy_(torch.arange(8, dtype=torch.float64).reshape(2, 4) - 3)
    lin.bias.fill_(0.5)
x = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(3, 4)
(lin(x) ** 2).sum().backward()
total = nn.utils.clip_grad_norm_(lin.parameters(), max_norm=1.0)
print("total_norm", float(total))
print("clipped_norm", torch.cat([p.grad.flatten() for p in lin.parameters()]).norm().item())
lin.zero_grad()
(lin(x) ** 2).sum().backward()
torch.nn.utils.clip_grad_value_(lin.parameters(), clip_value=5.0)
print("value_clipped_max", max(p.grad.abs().max().item() for p in lin.parameters()))
print("bias_grad", *lin.bias.grad.tolist())
inf_norm = nn.utils.clip_grad_norm_(lin.parameters(), max_norm=100.0, norm_type=float("inf"))
print("inf_norm", float(inf_norm))
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
opt.step()
print("weight_after", *lin.weight.flatten().tolist())
