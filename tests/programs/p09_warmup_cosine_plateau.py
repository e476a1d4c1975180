# Warmup then cosine (SequentialLR), OneCycleLR stepped per batch, ReduceLROnPlateau on a validation loss.
# tolerance: 1e-12  (plain float arithmetic)
import torch
import torch.optim as optim

p = torch.nn.Parameter(torch.zeros(2))
opt = optim.SGD([p], lr=0.1, momentum=0.9)
warmup = optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
cosine = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=7, eta_min=1e-3)
sched = optim.lr_scheduler.SequentialLR(opt, schedulers=[warmup, cosine], milestones=[3])
lrs = []
for epoch in range(10):
    opt.step()
    sched.step()
    lrs.append(opt.param_groups[0]["lr"])
print("warmup_cosine", *lrs)

opt = optim.Adam([p], lr=1e-3)
cycle = optim.lr_scheduler.OneCycleLR(opt, max_lr=0.01, epochs=2, steps_per_epoch=5)
lrs, betas = [], []
for epoch in range(2):
    for batch in range(5):
        opt.step()
        if epoch * 5 + batch < 9: cycle.step()
        lrs.append(cycle.get_last_lr()[0])
        betas.append(opt.param_groups[0]["betas"][0])
print("onecycle", *lrs)
print("beta1", *betas)

opt = optim.SGD([p], lr=1.0)
plateau = optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1)
for val_loss in [1.0, 0.9, 0.95, 0.97, 0.96, 0.5, 0.6, 0.7]:
    opt.step()
    plateau.step(val_loss)
    print("plateau_lr", opt.param_groups[0]["lr"])
print("plateau_last", *plateau.get_last_lr())
