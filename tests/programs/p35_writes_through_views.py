# Writing through views in a graph: a buffer filled row by row, a slice scaled in place, a transposed
# view zeroed, an assignment through a reshaped view; gradients reach the inputs through every write.
# tolerance: 1e-12
import torch

torch.set_default_dtype(torch.float64)
x = torch.linspace(-1.0, 1.0, 12).reshape(3, 4).requires_grad_()
w = torch.tensor([0.5, -1.5, 2.0, 0.25], requires_grad=True)

# a sequence written step by step into a preallocated buffer, as a hand-written RNN does
h = torch.zeros(4)
out = torch.zeros(3, 4)
for t in range(3):
    h = torch.tanh(x[t] * w + h)
    out[t] = h
print("buffer", *out.detach().flatten().tolist())

y = x * 2.0
y[:, :2] *= 3.0                  # a slice scaled in place
y.t()[1].zero_()                 # a row of the transpose: column 1 of y
y.view(12)[5:7] = w[:2] * 10.0   # assignment through a reshaped view
y[2].mul_(w)                     # a row times a tensor that requires grad
print("y", *y.detach().flatten().tolist())

loss = (out * out).sum() + (y * y).sum()
loss.backward()
print("loss", loss.item())
print("x.grad", *x.grad.flatten().tolist())
print("w.grad", *w.grad.tolist())
print("versions", y._version, out._version)

# an optimizer-style update through a view of a parameter, under no_grad
with torch.no_grad():
    w[1:3] -= 0.1 * w.grad[1:3]
print("w", *w.tolist(), w.is_leaf, w.requires_grad)
