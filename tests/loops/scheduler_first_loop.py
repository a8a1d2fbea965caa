"""A loop that steps its warmup scheduler before the update: every update runs one value early."""
import torch


def train(model, optimizer, schedule, batches):
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    used = []
    for x in batches:
        scheduler.step()
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
    return used
