# A cubic fitted to sin(x) with torch.optim.SGD on scalar parameters, loss summed (the tutorial's shape).
# tolerance: 1e-9  (float64, 500 deterministic steps)
import math
import torch

x = torch.linspace(-math.pi, math.pi, 200, dtype=torch.float64)
y = torch.sin(x)
params = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (0.1, 0.2, -0.1, 0.05)]
a, b, c, d = params
optimizer = torch.optim.SGD(params, lr=1e-5)
for t in range(500):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum()
    if t % 100 == 99: print("loss_at", t, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("coefficients", a.item(), b.item(), c.item(), d.item())
