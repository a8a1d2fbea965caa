"""DDP loops whose schedule advances on rank 0 only; the runtime test runs them on two gloo ranks."""
import torch.distributed as dist


def train(model, optimizer, scheduler, batches):
    rank = dist.get_rank()
    for x in batches:
        model(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0:
            scheduler.step()


def train_logged(model, optimizer, scheduler, batches, log):
    for step, x in enumerate(batches):
        model(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if dist.get_rank() == 0:
            scheduler.step()
            log.append((step, scheduler.get_last_lr()[0]))


def train_counted(model, optimizer, batches, base_lr, warmup):
    global_step = 0
    for x in batches:
        for group in optimizer.param_groups:
            group["lr"] = base_lr * min(1.0, (global_step + 1) / warmup)
        model(x).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if dist.get_rank() == 0:
            print(f"step {global_step}")
            global_step += 1
    return global_step
