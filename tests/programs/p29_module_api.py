# The nn.Module API: submodules, ModuleList, register_buffer, named_parameters, apply(init), freezing, state_dict keys.
# tolerance: 1e-6  (counts, and float32 LayerNorm outputs: a few ulps of eps 1.2e-7 over 4-element sums)
import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(3)])
        self.norm = nn.LayerNorm(d)
        self.register_buffer("scale", torch.tensor(2.0))
    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        return self.norm(x) * self.scale

def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.constant_(m.weight, 0.01)
        nn.init.zeros_(m.bias)

model = Block(4)
model.apply(init_weights)
print("n_tensors", len(list(model.parameters())))
print("n_params", sum(p.numel() for p in model.parameters()))
print("n_keys", len(model.state_dict()))
print("has_scale_key", "scale" in model.state_dict(), "layers.2.bias" in model.state_dict())
print("first_name_is_layers0", next(iter(model.named_parameters()))[0] == "layers.0.weight")
for p in model.layers[0].parameters():
    p.requires_grad_(False)
print("trainable", sum(p.numel() for p in model.parameters() if p.requires_grad))
out = model(torch.ones(2, 4))
out.sum().backward()
print("frozen_grad_none", model.layers[0].weight.grad is None)
print("out", *out.flatten().tolist())
print("n_modules", len(list(model.modules())), len(list(model.children())))
