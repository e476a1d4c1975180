# Linear regression by hand: tensors with requires_grad, updated in place under torch.no_grad().
# tolerance: 1e-10  (float64, 200 deterministic steps)
import torch

x = torch.linspace(-1, 1, 50, dtype=torch.float64)
y = 3.0 * x - 0.5 + 0.1 * torch.sin(7 * x)
w = torch.zeros(1, dtype=torch.float64, requires_grad=True)
b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
lr = 0.1
for step in range(200):
    y_pred = w * x + b
    loss = ((y_pred - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        b -= lr * b.grad
        w.grad.zero_()
        b.grad.zero_()
    if step == 0: print("first_loss", loss.item())
print("final_loss", float(loss))
print("w", w.item())
print("b", b.item())
print("grad_is_zero", w.grad.abs().sum().item() == 0)
