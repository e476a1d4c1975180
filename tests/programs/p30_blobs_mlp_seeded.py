# The classic first classifier: seeded Gaussian blobs, an MLP, CrossEntropyLoss, SGD with momentum, mini-batches.
# bound: final_loss < 0.15
# bound: accuracy > 0.95
# same: n_train
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(123)
centers = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.5]])
labels = torch.randint(0, 3, (300,))
points = centers[labels] + 0.6 * torch.randn(300, 2)

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 32)
        self.fc2 = nn.Linear(32, 3)
    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

model = MLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(30):
    perm = torch.randperm(300)
    for i in range(0, 300, 50):
        idx = perm[i:i + 50]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(points[idx]), labels[idx])
        loss.backward()
        optimizer.step()
model.eval()
with torch.no_grad():
    logits = model(points)
    final_loss = F.cross_entropy(logits, labels).item()
    accuracy = (logits.argmax(dim=1) == labels).float().mean().item()
print("n_train", len(points))
print("final_loss", final_loss)
print("accuracy", accuracy)
