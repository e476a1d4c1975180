# nn.LSTM (batch_first) with a given (h0, c0), then a Linear head; outputs, final states and gradients.
# tolerance: 1e-10  (float64, a few dozen ops)
import torch
import torch.nn as nn

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, batch_first=True)
        self.head = nn.Linear(5, 3)
    def forward(self, x, state):
        out, (h, c) = self.lstm(x, state)
        return self.head(out), h, c

model = Tagger().double()
with torch.no_grad():
    for i, (name, p) in enumerate(model.named_parameters()):
        p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.29 + i).reshape(p.shape) * 0.4)
x = torch.cos(torch.arange(3 * 6 * 4, dtype=torch.float64) * 0.17).reshape(3, 6, 4)
state = (torch.full((1, 3, 5), 0.1, dtype=torch.float64), torch.full((1, 3, 5), -0.2, dtype=torch.float64))
scores, h, c = model(x, state)
target = torch.tensor([[0, 1, 2, 0, 1, 2]] * 3)
loss = nn.functional.cross_entropy(scores.reshape(-1, 3), target.reshape(-1))
loss.backward()
print("loss", loss.item())
print("h", *h.flatten().tolist())
print("c", *c.flatten().tolist())
print("grad_weight_hh", model.lstm.weight_hh_l0.grad.norm().item())
print("grad_head_bias", *model.head.bias.grad.tolist())
