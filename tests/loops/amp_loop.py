"""A plain AMP training loop with the bugs steplint fixes; the runtime tests run it before and after."""
import torch


def train(model, optimizer, scheduler, scaler, batches, max_updates=None):
    global_step = 0
    for x in batches:
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scheduler.step()
        global_step += 1
        if max_updates is not None and global_step >= max_updates:
            break
    return global_step
