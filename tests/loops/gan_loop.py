"""Two optimizers sharing one GradScaler, each with its own scheduler stepped after the update."""
import torch


def train(opt_a, opt_b, scaler, batches, loss_a, loss_b):
    sched_a = torch.optim.lr_scheduler.LambdaLR(opt_a, lambda s: min(1.0, (s + 1) / 10))
    sched_b = torch.optim.lr_scheduler.LambdaLR(opt_b, lambda s: min(1.0, (s + 1) / 10))
    for x in batches:
        opt_a.zero_grad()
        scaler.scale(loss_a(x)).backward()
        scaler.step(opt_a)
        opt_b.zero_grad()
        scaler.scale(loss_b(x)).backward()
        scaler.step(opt_b)
        scaler.update()
        sched_a.step()
        sched_b.step()
    return sched_a.last_epoch, sched_b.last_epoch
