# Negative log-likelihood by hand with x[range(n), target], boolean masks and accuracy, against F.cross_entropy.
# tolerance: 1e-12  (float64, no iteration)
import torch
import torch.nn.functional as F

n, k = 6, 4
logits = torch.sin(torch.arange(n * k, dtype=torch.float64) * 1.3).reshape(n, k) * 3
logits.requires_grad_()
target = torch.tensor([0, 3, 1, 1, 2, 0])
log_probs = logits.log_softmax(dim=1)
manual = -log_probs[range(n), target].mean()
builtin = F.cross_entropy(logits, target)
manual.backward()
print("manual_nll", manual.item())
print("builtin_ce", builtin.item())
print("grad_row0", *logits.grad[0].tolist())
pred = logits.argmax(dim=1)
print("accuracy", (pred == target).float().mean().item())
print("correct", (pred == target).sum().item())
mask = logits.detach() > 0
print("positives", mask.sum().item(), logits.detach()[mask].sum().item())
clipped = logits.detach().clone()
clipped[clipped < -1] = -1
print("clipped_min", clipped.min().item())
print("picked", *logits.detach()[torch.arange(n), target].tolist())
