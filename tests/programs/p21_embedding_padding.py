# nn.Embedding with padding_idx (its row gets no gradient), mean-pooled bag of words, and index_select.
# tolerance: 1e-12  (float64, one step)
import torch
import torch.nn as nn

emb = nn.Embedding(6, 3, padding_idx=0, dtype=torch.float64)
with torch.no_grad():
    emb.weight.copy_(torch.sin(torch.arange(18, dtype=torch.float64)).reshape(6, 3))
    emb.weight[0].fill_(0)
tokens = torch.tensor([[1, 2, 0, 0], [3, 3, 5, 0]])
lengths = (tokens != 0).sum(dim=1, keepdim=True)
vectors = emb(tokens).sum(dim=1) / lengths
loss = (vectors ** 2).sum()
loss.backward()
print("lengths", *lengths.flatten().tolist())
print("vectors", *vectors.flatten().tolist())
print("pad_grad", emb.weight.grad[0].abs().sum().item())
print("row3_grad", *emb.weight.grad[3].tolist())
print("selected", *emb.weight.detach().index_select(0, torch.tensor([5, 1])).flatten().tolist())
with torch.no_grad():
    emb.weight -= 0.1 * emb.weight.grad
print("updated_row5", *emb.weight[5].tolist())
