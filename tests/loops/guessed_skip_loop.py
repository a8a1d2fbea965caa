"""AMP loops that guess whether the update committed, each in a way seen in real trainers; the
runtime tests run them before and after `steplint check --fix`."""
import math

import torch


def train_flag(model, optimizer, scheduler, scaler, batches):
    """The scale compared around the step and kept in a flag (older Trainer code)."""
    completed = 0
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        scale_before = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        optimizer_was_run = scale_before <= scaler.get_scale()
        optimizer.zero_grad()
        if optimizer_was_run:
            scheduler.step()
            completed += 1
    return completed


def train_strict(model, optimizer, scheduler, scaler, batches):
    """A strict comparison: true only when the scale grew."""
    completed = 0
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        old_scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if old_scale < scaler.get_scale():
            scheduler.step()
            completed += 1
    return completed


def train_read_before_update(model, optimizer, scheduler, scaler, batches):
    """The scale read again before update(), when it cannot have changed yet."""
    completed = 0
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)
        if scaler.get_scale() >= scale:
            scheduler.step()
            completed += 1
        scaler.update()
        optimizer.zero_grad()
    return completed


def train_loss_finite(model, optimizer, scheduler, scaler, batches):
    """The loss's finiteness standing in for the gradients'."""
    completed = 0
    for x in batches:
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if math.isfinite(loss.item()):
            scheduler.step()
            completed += 1
    return completed


def train_nan_check(model, optimizer, scheduler, scaler, batches):
    """A NaN loss taken as the only way an update is skipped."""
    completed = 0
    for x in batches:
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if not torch.isnan(loss):
            scheduler.step()
            completed += 1
    return completed


def train_skip_flag(model, optimizer, scheduler, scaler, batches):
    """The flag says "skipped": the scale went down."""
    completed = 0
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        skip_lr_sched = scale > scaler.get_scale()
        optimizer.zero_grad()
        if not skip_lr_sched:
            scheduler.step()
            completed += 1
    return completed


def optimizer_step(scaler, optimizer):
    scaler.step(optimizer)
    scaler.update()


def train_helper(model, optimizer, scheduler, scaler, batches):
    """The step and update in a helper; a strict comparison around its call."""
    completed = 0
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        before = scaler.get_scale()
        optimizer_step(scaler, optimizer)
        optimizer.zero_grad()
        if before < scaler.get_scale():
            scheduler.step()
            completed += 1
    return completed


def train_pair(opt_d, opt_g, scaler, batches, loss_d, loss_g):
    """Two optimizers share a scaler, each updated, scale-checked and scheduled in turn."""
    sched_d = torch.optim.lr_scheduler.LambdaLR(opt_d, lambda s: min(1.0, (s + 1) / 10))
    sched_g = torch.optim.lr_scheduler.LambdaLR(opt_g, lambda s: min(1.0, (s + 1) / 10))
    for x in batches:
        opt_d.zero_grad()
        scaler.scale(loss_d(x)).backward()
        scale_d = scaler.get_scale()
        scaler.step(opt_d)
        scaler.update()
        if scale_d <= scaler.get_scale():
            sched_d.step()
        opt_g.zero_grad()
        scaler.scale(loss_g(x)).backward()
        scale_g = scaler.get_scale()
        scaler.step(opt_g)
        scaler.update()
        if scale_g <= scaler.get_scale():
            sched_g.step()
    return sched_d.last_epoch, sched_g.last_epoch
