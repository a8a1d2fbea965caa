"""An AMP loop whose evaluation cadence reads the update counter right after it advances: the fix
must gate the cadence check with the counter, or a skipped update repeats the evaluation."""
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
    return global_step
