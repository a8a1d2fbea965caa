"""A fused optimizer whose step post-hook counts updates: blind to GradScaler's skips."""
import torch


def train(model, batches):
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
    scaler = torch.amp.GradScaler("cpu")
    counted = []
    optimizer.register_step_post_hook(lambda opt, args, kwargs: counted.append(1))
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    return len(counted)
