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
