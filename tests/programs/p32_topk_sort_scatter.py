# Ranking and one-hot idioms: topk for top-5 accuracy, sort/argsort, scatter_ for one-hot, diag of a confusion matrix.
# tolerance: 0  (exact: small integers)
import torch

logits = torch.tensor([[0.1, 0.7, 0.2, 0.0], [0.5, 0.1, 0.3, 0.9], [0.3, 0.2, 0.6, 0.1]])
target = torch.tensor([1, 2, 0])
_, top2 = logits.topk(2, dim=1)
print("top2_correct", (top2 == target.unsqueeze(1)).any(dim=1).sum().item())
vals, inds = torch.topk(logits[0], k=3)
print("topk", *vals.tolist(), *inds.tolist())
sv, si = torch.sort(logits[1], descending=True)
print("sort", *sv.tolist(), *si.tolist())
print("argsort", *logits[2].argsort().tolist())
one_hot = torch.zeros(3, 4).scatter_(1, target.unsqueeze(1), 1.0)
print("one_hot", *one_hot.flatten().tolist())
confusion = torch.zeros(4, 4, dtype=torch.long)
for t, p in zip(target, logits.argmax(1)):
    confusion[t, p] += 1
print("confusion_diag", *confusion.diag().tolist())
