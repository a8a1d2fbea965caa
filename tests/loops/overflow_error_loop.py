"""fairseq-style: the fp16 optimizer raises OverflowError when the gradients overflow, the handler
drops the update and the pass goes on; the schedule advances after the `try`."""


def train(model, optimizer, lr_scheduler, batches):
    for x in batches:
        optimizer.backward(model(x).pow(2).mean())
        try:
            optimizer.step()
        except OverflowError:
            print("gradient overflow, dropping this update")
            optimizer.zero_grad()
        lr_scheduler.step()
        optimizer.zero_grad()
