"""A one-cycle schedule laid out over the batches while it steps once per accumulation window."""
import torch


def train(model, optimizer, batches, accum, epochs, max_lr):
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, total_steps=len(batches) * epochs)
    for epoch in range(epochs):
        for i, x in enumerate(batches):
            (model(x).pow(2).mean() / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
    return scheduler
