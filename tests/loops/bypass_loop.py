"""AMP loops that scale the loss but call optimizer.step() themselves."""
import torch


def train(model, optimizer, scaler, batches):
    for x in batches:
        optimizer.zero_grad()
        scaler.scale(model(x).pow(2).mean()).backward()
        optimizer.step()
        scaler.update()


def train_clipped(model, optimizer, scaler, batches, max_norm):
    """Unscaled and clipped first, so only non-finite gradients get through."""
    for x in batches:
        optimizer.zero_grad()
        scaler.scale(model(x).pow(2).mean()).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        scaler.update()


def train_window(model, optimizer, scaler, batches, accum):
    """Accumulation windows, the plain step at each window's end."""
    for i, x in enumerate(batches):
        scaler.scale(model(x).pow(2).mean() / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            scaler.update()
            optimizer.zero_grad()


def train_unscaled_never(model, optimizer, batches, device="cpu"):
    """Neither scaler.step nor scaler.update: the scaled gradients go straight in."""
    scaler = torch.amp.GradScaler(device)
    for x in batches:
        optimizer.zero_grad()
        scaler.scale(model(x).pow(2).mean()).backward()
        optimizer.step()
    return scaler
