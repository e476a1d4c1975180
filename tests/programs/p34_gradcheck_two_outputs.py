# Checking a custom Function that returns two tensors with torch.autograd.gradcheck (and gradgradcheck).
# tolerance: 0  (booleans)
import torch

class SinCos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, g_sin, g_cos):
        x, = ctx.saved_tensors
        return g_sin * x.cos() - g_cos * x.sin()

x = torch.linspace(-1, 1, 5, dtype=torch.float64, requires_grad=True)
s, c = SinCos.apply(x)
(s * c).sum().backward()
print("grad", *x.grad.tolist())
print("gradcheck_first", torch.autograd.gradcheck(lambda t: SinCos.apply(t)[0], (x,)))
print("gradcheck_both", torch.autograd.gradcheck(SinCos.apply, (x,)))
print("gradgradcheck_both", torch.autograd.gradgradcheck(SinCos.apply, (x,)))
