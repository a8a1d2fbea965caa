"""An AMP loop with gradient accumulation: the scheduler steps per batch, the counter per attempt."""
import torch


def train(model, optimizer, scheduler, scaler, batches, accum, max_updates=None):
    global_step = 0
    for i, x in enumerate(batches):
        loss = model(x).pow(2).mean() / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            global_step += 1
        scheduler.step()
        if max_updates is not None and global_step >= max_updates:
            break
    return global_step
