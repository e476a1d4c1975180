# Checks a user writes in tests and loops: .all(), .any(), torch.allclose, torch.isclose, torch.equal.
# tolerance: 0  (booleans and counts)
import torch

a = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
b = a + 1e-10
print("all_positive", bool((a > 0).all()))
print("any_above_2", (a > 2).any().item())
print("all_dim", *(torch.ones(2, 3) > 0).all(dim=1).tolist())
print("allclose", torch.allclose(a, b), torch.allclose(a, a + 1e-3))
print("isclose_count", torch.isclose(a, torch.tensor([1.0, 2.5, 3.0], dtype=torch.float64)).sum().item())
print("equal", torch.equal(a, a.clone()), torch.equal(a, b))
print("method_allclose", a.allclose(b), a.equal(a))
