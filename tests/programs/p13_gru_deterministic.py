# nn.GRU (sequence-first, bidirectional) with weights written under no_grad; outputs and an input gradient.
# tolerance: 1e-10  (float64, a few dozen ops)
import torch
import torch.nn as nn

gru = nn.GRU(input_size=2, hidden_size=3, bidirectional=True, dtype=torch.float64)
with torch.no_grad():
    for i, p in enumerate(gru.parameters()):
        p.copy_(torch.cos(torch.arange(p.numel(), dtype=torch.float64) * 0.41 + i).reshape(p.shape) * 0.6)
x = torch.sin(torch.arange(7 * 2 * 2, dtype=torch.float64) * 0.3).reshape(7, 2, 2).requires_grad_()
out, h_n = gru(x)
out.mean().backward()
print("out_shape", *out.shape)
print("h_n_shape", *h_n.shape)
print("out_mean", out.mean().item())
print("h_n", *h_n.flatten().tolist())
print("x_grad_first", *x.grad[0].flatten().tolist())
print("forward_matches_h_n", (out[-1, :, :3] - h_n[0]).abs().max().item())
