# Reading a tensor's version counter (`t._version`, an int in PyTorch) to see that an in-place op happened.
# tolerance: 0  (integers)
import torch

x = torch.zeros(3)
v0 = x._version
x.add_(1)
x[0] = 5
print("versions", v0, x._version)
print("bumped", x._version > v0)
