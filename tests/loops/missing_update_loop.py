"""An AMP loop that never calls scaler.update(); the runtime tests run it before and after the fix."""
import torch


def train(model, optimizer, batches, device="cpu"):
    scaler = torch.amp.GradScaler(device)
    for x in batches:
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    return scaler


def train_pair(model_a, model_b, opt_a, opt_b, batches, device="cpu"):
    """Two models, one scaler: both backward passes, then both steps."""
    scaler = torch.amp.GradScaler(device)
    for x in batches:
        opt_a.zero_grad()
        opt_b.zero_grad()
        scaler.scale(model_a(x).pow(2).mean()).backward()
        scaler.scale(model_b(x).pow(2).mean()).backward()
        scaler.step(opt_a)
        scaler.step(opt_b)
    return scaler


def train_window(model, optimizer, batches, accum, device="cpu"):
    """Accumulation windows; the step at each window's end, no update."""
    scaler = torch.amp.GradScaler(device)
    for i, x in enumerate(batches):
        scaler.scale(model(x).pow(2).mean() / accum).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
    return scaler
