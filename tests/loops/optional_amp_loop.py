"""AMP optional: without it there is no scaler, and the fp32 branch steps the optimizer itself."""


def train(model, optimizer, scheduler, batches, scaler=None):
    for x in batches:
        loss = model(x).pow(2).mean()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
