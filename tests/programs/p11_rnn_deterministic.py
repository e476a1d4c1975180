# nn.RNN (tanh, two layers, batch_first) with weights written under no_grad; outputs and gradients.
# tolerance: 1e-10  (float64, a few dozen ops)
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
rnn = nn.RNN(input_size=3, hidden_size=4, num_layers=2, batch_first=True)
with torch.no_grad():
    for i, p in enumerate(rnn.parameters()):
        p.copy_(torch.sin(torch.arange(p.numel()) * 0.37 + i).reshape(p.shape) * 0.5)
x = torch.cos(torch.arange(2 * 5 * 3) * 0.21).reshape(2, 5, 3)
h0 = torch.zeros(2, 2, 4)
out, h_n = rnn(x, h0)
loss = out.pow(2).sum() + h_n.sum()
loss.backward()
print("out_shape", *out.shape)
print("h_n_shape", *h_n.shape)
print("loss", loss.item())
print("out_last", *out[:, -1].flatten().tolist())
print("grad_w_ih_l0", rnn.weight_ih_l0.grad.sum().item(), rnn.weight_ih_l0.grad.abs().max().item())
print("grad_b_hh_l1", *rnn.bias_hh_l1.grad.tolist())
print("param_names", len(list(rnn.named_parameters())))
