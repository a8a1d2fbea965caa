"""A counter passed into the epoch function and returned, that names the checkpoints and may end the
run (a budget `train` hands on, which the tests leave unset: no call of the module fixes it at None)."""
import torch


def train_one_epoch(model, optimizer, scheduler, scaler, batches, global_step, save_every, out_dir, max_steps=None):
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scheduler.step()
        global_step += 1
        if global_step % save_every == 0:
            torch.save(model.state_dict(), f"{out_dir}/step-{global_step}.pt")
        if max_steps is not None and global_step >= max_steps:
            break
    return global_step


def train(model, optimizer, scheduler, scaler, epochs, save_every, out_dir, max_steps=None):
    global_step = 0
    for batches in epochs:
        global_step = train_one_epoch(model, optimizer, scheduler, scaler, batches, global_step, save_every, out_dir, max_steps)
    return global_step
