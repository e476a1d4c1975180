# Causal scaled dot-product attention by hand (masked_fill with -inf, softmax), against F.scaled_dot_product_attention.
# tolerance: 1e-12  (float64, one attention)
import math
import torch
import torch.nn.functional as F

B, T, D = 2, 5, 4
q = torch.sin(torch.arange(B * T * D, dtype=torch.float64)).reshape(B, T, D).requires_grad_()
k = torch.cos(torch.arange(B * T * D, dtype=torch.float64) * 0.7).reshape(B, T, D)
v = torch.sin(torch.arange(B * T * D, dtype=torch.float64) * 1.9).reshape(B, T, D)
scores = q @ k.transpose(-2, -1) / math.sqrt(D)
mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
scores = scores.masked_fill(~mask, float("-inf"))
weights = torch.softmax(scores, dim=-1)
out = weights @ v
builtin = F.scaled_dot_product_attention(q, k, v, is_causal=True)
out.sum().backward()
print("out_sum", out.sum().item())
print("max_diff_builtin", (out - builtin).abs().max().item())
print("weights_row_sums", *weights.sum(-1).flatten().tolist())
print("first_row_weight", weights[0, 0, 0].item())
print("q_grad_norm", q.grad.norm().item())
