# A small conv net (Conv2d, ReLU, MaxPool2d, flatten, Linear) with weights written in; loss and gradients.
# tolerance: 1e-10  (float64, one forward and backward)
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(6 * 1 * 1, 3)
    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = F.relu(self.conv2(x))
        x = torch.flatten(x, 1)
        return self.fc(x)

net = Net().to(torch.float64)
with torch.no_grad():
    for i, p in enumerate(net.parameters()):
        p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.53 + i).reshape(p.shape) * 0.5)
x = torch.cos(torch.arange(2 * 1 * 8 * 8, dtype=torch.float64) * 0.37).reshape(2, 1, 8, 8)
out = net(x)
loss = F.cross_entropy(out, torch.tensor([2, 0]))
loss.backward()
print("out_shape", *out.shape)
print("loss", loss.item())
print("logits", *out.flatten().tolist())
print("conv1_grad", net.conv1.weight.grad.sum().item(), net.conv1.weight.grad.abs().max().item())
print("conv2_bias_grad", *net.conv2.bias.grad.tolist())
