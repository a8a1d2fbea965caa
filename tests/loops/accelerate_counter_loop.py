"""HF no_trainer-style: a prepared scheduler (it skips by itself), and `completed_steps` counted at
each window's end, which ends the run."""
from accelerate import Accelerator


def train(model, optimizer, make_scheduler, batches, accum, max_train_steps):
    accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=accum)
    lr_scheduler = make_scheduler(optimizer)
    model, optimizer, lr_scheduler = accelerator.prepare(model, optimizer, lr_scheduler)
    completed_steps = 0
    for batch in batches:
        with accelerator.accumulate(model):
            loss = model(batch).float().pow(2).mean()
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            completed_steps += 1
        if completed_steps >= max_train_steps:
            break
    return completed_steps
