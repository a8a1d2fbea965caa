"""A counter advanced by a helper nested in the training function (`nonlocal`), which also sets the LR."""


def train(model, optimizer, scaler, batches, base_lr=0.1, warmup=10):
    global_step = 0

    def advance():
        nonlocal global_step
        global_step += 1
        for group in optimizer.param_groups:
            group["lr"] = base_lr * min(1.0, (global_step + 1) / warmup)

    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        advance()
    return global_step
