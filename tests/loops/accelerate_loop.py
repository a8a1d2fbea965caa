"""An accelerate loop: the optimizer is prepared (on fp16 overflow its step is skipped), the warmup
scheduler is built on it afterwards and never prepared, so it does not know about the skips."""

import torch
from accelerate import Accelerator


def train(model, optimizer, make_scheduler, batches, max_updates=None):
    accelerator = Accelerator(mixed_precision="fp16")
    model, optimizer = accelerator.prepare(model, optimizer)
    scheduler = make_scheduler(optimizer)
    for batch in batches:
        loss = model(batch).float().pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return scheduler.last_epoch
