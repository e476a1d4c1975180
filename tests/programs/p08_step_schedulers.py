# Step-style schedulers in an epoch loop: StepLR with a float step size, MultiStepLR, ExponentialLR.
# tolerance: 1e-12  (plain float arithmetic)
import torch
from torch.optim.lr_scheduler import StepLR, MultiStepLR, ExponentialLR

w = torch.zeros(3, requires_grad=True)
for name, make in [("step_float", lambda o: StepLR(o, 1.0, gamma=0.95)),
                   ("step_3", lambda o: StepLR(o, step_size=3, gamma=0.5)),
                   ("multistep", lambda o: MultiStepLR(o, milestones=[4, 7], gamma=0.1)),
                   ("exponential", lambda o: ExponentialLR(o, gamma=0.9))]:
    optimizer = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    scheduler = make(optimizer)
    lrs = []
    for epoch in range(10):
        optimizer.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
    print(name, *lrs)
    print(name + "_group_lr", optimizer.param_groups[0]["lr"])
