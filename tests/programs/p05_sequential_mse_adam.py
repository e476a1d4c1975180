# nn.Sequential trained with Adam on MSE, float64 by default, weights written in through the state_dict.
# tolerance: 1e-9  (float64, 100 deterministic Adam steps)
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
state = model.state_dict()
for i, (name, t) in enumerate(state.items()):
    state[name] = torch.sin(torch.arange(t.numel()) * 0.37 + i).reshape(t.shape) * 0.5
model.load_state_dict(state)

x = torch.stack([torch.linspace(-1, 1, 64), torch.cos(torch.linspace(0, 6, 64))], dim=1)
y = (x[:, 0] * x[:, 1]).unsqueeze(1)
loss_fn = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(100):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
print("final_loss", loss.item())
print("first_weight_sum", model[0].weight.sum().item())
print("out_bias", model[2].bias.item())
print("dtype_is_float64", model(x).dtype == torch.float64)
