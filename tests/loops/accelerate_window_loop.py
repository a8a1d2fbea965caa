"""An accelerate loop with accumulation windows: the prepared optimizer steps at each window's end
(and skips the step on fp16 overflow); the scheduler, built on it and never prepared, advances once
per window whether or not the update committed."""

import torch
from accelerate import Accelerator


def train(model, optimizer, make_scheduler, batches, accum, max_updates=None):
    accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=accum)
    model, optimizer = accelerator.prepare(model, optimizer)
    scheduler = make_scheduler(optimizer)
    for batch in batches:
        with accelerator.accumulate(model):
            loss = model(batch).float().pow(2).mean()
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            scheduler.step()
    return scheduler.last_epoch
