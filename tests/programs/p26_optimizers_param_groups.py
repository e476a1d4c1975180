# Optimizers with options and parameter groups: SGD (momentum, nesterov, weight decay), AdamW, RMSprop, Adagrad.
# tolerance: 1e-10  (float64, 25 deterministic steps each)
import torch

def run(make):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
    b = torch.nn.Parameter(torch.tensor([0.3], dtype=torch.float64))
    opt = make([{"params": [w]}, {"params": [b], "lr": 0.01}])
    for _ in range(25):
        opt.zero_grad()
        loss = ((w ** 2).sum() - 1) ** 2 + (b - 2).pow(2).sum() + (w.sum() * b).sum()
        loss.backward()
        opt.step()
    return w.tolist() + b.tolist()

print("sgd", *run(lambda g: torch.optim.SGD(g, lr=0.02)))
print("sgd_momentum", *run(lambda g: torch.optim.SGD(g, lr=0.02, momentum=0.9, weight_decay=1e-2)))
print("sgd_nesterov", *run(lambda g: torch.optim.SGD(g, lr=0.02, momentum=0.9, nesterov=True, dampening=0)))
print("adam", *run(lambda g: torch.optim.Adam(g, lr=0.05, betas=(0.8, 0.99))))
print("adam_amsgrad", *run(lambda g: torch.optim.Adam(g, lr=0.05, amsgrad=True, weight_decay=0.1)))
print("adamw", *run(lambda g: torch.optim.AdamW(g, lr=0.05, weight_decay=0.1)))
print("rmsprop", *run(lambda g: torch.optim.RMSprop(g, lr=0.01, alpha=0.9, momentum=0.5)))
print("adagrad", *run(lambda g: torch.optim.Adagrad(g, lr=0.1)))
