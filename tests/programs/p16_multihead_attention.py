# nn.MultiheadAttention (batch_first, key padding mask) with weights written in; output and averaged weights.
# tolerance: 1e-10  (float64, one layer)
import torch
import torch.nn as nn

mha = nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True).double()
with torch.no_grad():
    for i, p in enumerate(mha.parameters()):
        p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.13 + i).reshape(p.shape) * 0.3)
x = torch.cos(torch.arange(2 * 4 * 8, dtype=torch.float64) * 0.11).reshape(2, 4, 8)
pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
out, attn = mha(x, x, x, key_padding_mask=pad)
out.sum().backward()
print("out_shape", *out.shape)
print("attn_shape", *attn.shape)
print("out_sum", out.sum().item())
print("attn_to_pad", attn[0, :, 3].abs().max().item())
print("in_proj_grad_norm", mha.in_proj_weight.grad.norm().item())
