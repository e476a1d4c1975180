# The common losses, module and functional forms, with reductions, weights, label smoothing and ignore_index.
# tolerance: 1e-12  (float64, no iteration)
import torch
import torch.nn as nn
import torch.nn.functional as F

pred = torch.tensor([[0.2, -1.0, 0.5], [1.5, 0.3, -0.7]], dtype=torch.float64, requires_grad=True)
target = torch.tensor([[0.0, -0.5, 1.0], [2.0, 0.0, 0.0]], dtype=torch.float64)
print("mse", nn.MSELoss()(pred, target).item())
print("mse_sum", F.mse_loss(pred, target, reduction="sum").item())
print("l1", nn.L1Loss()(pred, target).item())
print("smooth_l1", nn.SmoothL1Loss(beta=0.5)(pred, target).item())
print("huber", nn.HuberLoss(delta=0.8)(pred, target).item())
probs = torch.sigmoid(pred)
labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]], dtype=torch.float64)
print("bce", nn.BCELoss()(probs, labels).item())
print("bce_logits", nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64))(pred, labels).item())
classes = torch.tensor([2, 0])
print("ce", nn.CrossEntropyLoss()(pred, classes).item())
print("ce_smooth", nn.CrossEntropyLoss(label_smoothing=0.1)(pred, classes).item())
print("ce_weight", F.cross_entropy(pred, classes, weight=torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).item())
print("ce_ignore", F.cross_entropy(pred, torch.tensor([2, -100])).item())
print("ce_none", *F.cross_entropy(pred, classes, reduction="none").tolist())
print("nll", nn.NLLLoss()(F.log_softmax(pred, dim=1), classes).item())
print("kl", nn.KLDivLoss(reduction="batchmean")(F.log_softmax(pred, dim=1), F.softmax(target, dim=1)).item())
total = F.mse_loss(pred, target) + F.cross_entropy(pred, classes)
total.backward()
print("grad", *pred.grad.flatten().tolist())
