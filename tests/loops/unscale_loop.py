"""AMP with accumulation: unscale and clip every micro-batch, step once per window."""
import torch


def train(model, optimizer, scaler, batches, accum, max_norm):
    for i, x in enumerate(batches):
        scaler.scale(model(x).pow(2).mean() / accum).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parameters=model.parameters(), max_norm=max_norm)
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
