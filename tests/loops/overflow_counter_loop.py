"""fairseq-style: the fp16 optimizer raises OverflowError and the handler drops the update; the LR
is set from the update counter before each step, and the counter advances after the `try`."""


def train(model, optimizer, batches, base_lr=0.1, warmup=10):
    num_updates = 0
    for x in batches:
        for group in optimizer.optimizer.param_groups:
            group["lr"] = base_lr * min(1.0, (num_updates + 1) / warmup)
        optimizer.backward(model(x).pow(2).mean())
        try:
            optimizer.step()
        except OverflowError:
            optimizer.zero_grad()
        num_updates += 1
        optimizer.zero_grad()
    return num_updates
