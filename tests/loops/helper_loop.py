"""An AMP loop whose update is made by a helper of the same module; the runtime tests run it before
and after the fix (which makes the helper return whether the update committed)."""
import torch


def optimizer_step(scaler, optimizer):
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()


def train(model, optimizer, scheduler, scaler, batches, max_updates=None):
    global_step = 0
    for x in batches:
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        optimizer_step(scaler, optimizer)
        scheduler.step()
        global_step += 1
        if max_updates is not None and global_step >= max_updates:
            break
    return global_step
