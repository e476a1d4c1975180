# A custom autograd.Function (the Legendre polynomial P3) with ctx.save_for_backward, used in a fit.
# tolerance: 1e-10  (float64, 300 deterministic steps)
import math
import torch

class LegendreP3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)

x = torch.linspace(-math.pi, math.pi, 100, dtype=torch.float64)
y = torch.sin(x)
a = torch.full((), 0.0, dtype=torch.float64, requires_grad=True)
b = torch.full((), -1.0, dtype=torch.float64, requires_grad=True)
c = torch.full((), 0.0, dtype=torch.float64, requires_grad=True)
d = torch.full((), 0.3, dtype=torch.float64, requires_grad=True)
lr = 5e-6
for t in range(300):
    P3 = LegendreP3.apply
    y_pred = a + b * P3(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= lr * p.grad
            p.grad = None
print("loss", loss.item())
print("params", a.item(), b.item(), c.item(), d.item())
print("grad_fn_named", type(y_pred.grad_fn).__name__ != "")
