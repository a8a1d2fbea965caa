"""Gradient accumulation under AMP with scaler.update() every micro-batch."""


def train(model, optimizer, scaler, batches, accum):
    for i, x in enumerate(batches):
        scaler.scale(model(x).pow(2).mean() / accum).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
        scaler.update()


def train_logged(model, optimizer, scaler, batches, accum):
    losses = []
    for i, x in enumerate(batches):
        loss = model(x).pow(2).mean() / accum
        scaler.scale(loss).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
        losses.append(loss.item())
        scaler.update()
    return losses
