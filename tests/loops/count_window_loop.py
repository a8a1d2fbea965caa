"""An AMP loop with gradient accumulation by a count that reaches the window's length and starts over: the
scheduler steps per batch, the counter per attempt."""
import torch


def train(model, optimizer, scheduler, scaler, batches, accum, max_updates=None):
    global_step = 0
    micro_batches = 0
    for x in batches:
        loss = model(x).pow(2).mean() / accum
        scaler.scale(loss).backward()
        micro_batches += 1
        if micro_batches == accum:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            micro_batches = 0
            global_step += 1
        scheduler.step()
        if max_updates is not None and global_step >= max_updates:
            break
    return global_step
