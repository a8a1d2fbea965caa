"""An AMP loop whose unscale_ comes right after the clip instead of before it."""
import torch


def train(model, optimizer, scaler, batches, max_norm):
    norms = []
    for x in batches:
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)))
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    return norms
