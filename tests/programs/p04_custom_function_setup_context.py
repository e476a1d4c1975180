# A custom Function in the newer style: forward without ctx, setup_context, needs_input_grad, two outputs.
# tolerance: 1e-12  (float64, a few ops)
import torch
from torch.autograd import Function

class MulAdd(Function):
    @staticmethod
    def forward(x, y, alpha):
        return x * y + alpha, x - y

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, alpha = inputs
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha

    @staticmethod
    def backward(ctx, g1, g2):
        x, y = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]: gx = g1 * y + g2
        if ctx.needs_input_grad[1]: gy = g1 * x - g2
        return gx, gy, None

x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
y = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
p, q = MulAdd.apply(x, y, 2.0)
(p.sum() * 2 + (q ** 2).sum()).backward()
print("p", *p.tolist())
print("q", *q.tolist())
print("x_grad", *x.grad.tolist())
print("y_grad", *y.grad.tolist())
print("gradcheck", torch.autograd.gradcheck(lambda a, b: MulAdd.apply(a, b, 0.5)[0], (x.detach().requires_grad_(), y.detach().requires_grad_())))
