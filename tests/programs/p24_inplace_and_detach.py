# In-place idioms: add_/mul_/clamp_ under no_grad, .data, detach, requires_grad_, zero_, fill_, copy_.
# tolerance: 1e-12  (float64, a few ops)
import torch

w = torch.ones(4, dtype=torch.float64, requires_grad=True)
loss = (w * torch.arange(4, dtype=torch.float64)).sum()
loss.backward()
with torch.no_grad():
    w.add_(w.grad, alpha=-0.5)
    w.mul_(2).clamp_(min=-1.5, max=1.5)
print("w", *w.tolist())
print("requires_grad_kept", w.requires_grad, w.is_leaf)
w.grad.zero_()
w.data.fill_(0.25)
print("data_fill", *w.tolist())
d = w.detach()
d[0] = 9.0
print("detach_shares", w[0].item())
a = torch.zeros(3, dtype=torch.float64).requires_grad_()
b = a.clone()
b.copy_(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
(b * b).sum().backward()
print("copy_grad", *a.grad.tolist())
x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
y = x * 2
y.relu_()
y.sum().backward()
print("relu_inplace_grad", *x.grad.tolist())
