"""An AMP loop whose update counter ends the run and paces an evaluation that reads it right after it
advances: the fix must gate the cadence check with the counter, or a skipped update repeats the
evaluation."""
import torch

EVALUATED = []


def evaluate(model, step):
    EVALUATED.append(step)


def train(model, optimizer, scheduler, scaler, batches, max_updates=None, eval_every=4):
    global_step = 0
    for x in batches:
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scheduler.step()
        global_step += 1
        if global_step % eval_every == 0:
            evaluate(model, global_step)
        if max_updates is not None and global_step >= max_updates:
            break
    return global_step
