# torch.autograd.grad with create_graph=True: a second derivative, a Hessian-vector product, a gradient penalty.
# tolerance: 1e-12  (float64, a few ops)
import torch

x = torch.tensor([0.5, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
y = (x ** 3).sum() + (x[0] * x[1]).sin()
g, = torch.autograd.grad(y, x, create_graph=True)
print("grad", *g.tolist())
v = torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
hvp, = torch.autograd.grad(g, x, grad_outputs=v, retain_graph=True)
print("hvp", *hvp.tolist())
d2, = torch.autograd.grad(g[2], x)
print("d2_row2", *d2.tolist())

w = torch.tensor([[0.3, -0.2], [0.1, 0.4]], dtype=torch.float64, requires_grad=True)
inp = torch.tensor([[1.0, 2.0]], dtype=torch.float64, requires_grad=True)
out = torch.tanh(inp @ w).sum()
gi, = torch.autograd.grad(out, inp, create_graph=True)
penalty = (gi.norm(2) - 1) ** 2
penalty.backward()
print("penalty", penalty.item())
print("w_grad", *w.grad.flatten().tolist())
print("inp_grad_is_none", inp.grad is None)
