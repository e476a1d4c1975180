# model.train() / model.eval(): BatchNorm1d running statistics and Dropout, with torch.no_grad() evaluation.
# tolerance: 1e-10  (float64; dropout only in eval mode, where it is the identity)
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4, momentum=0.2), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4, 1))
model = model.double()
with torch.no_grad():
    for i, p in enumerate(model.parameters()):
        p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.77 + i).reshape(p.shape))
x = torch.cos(torch.arange(8 * 3, dtype=torch.float64) * 0.31).reshape(8, 3)
model.train()
for _ in range(3):
    model[1](model[0](x))   # updates the running statistics
bn = model[1]
print("running_mean", *bn.running_mean.tolist())
print("running_var", *bn.running_var.tolist())
print("num_batches", bn.num_batches_tracked.item())
model.eval()
with torch.no_grad():
    y1 = model(x)
    y2 = model(x)
print("eval_out", *y1.flatten().tolist())
print("eval_deterministic", (y1 - y2).abs().max().item())
print("training_flags", model.training, model[3].training)
print("buffers", len(list(model.buffers())))
