"""yolov5-style: updates once `accumulate` batches have passed since the last one, an epoch scheduler."""
import torch


def train(model, optimizer, scheduler, scaler, epochs, accumulate):
    last_opt_step = -1
    ni = 0
    for batches in epochs:
        for x in batches:
            loss = model(x).pow(2).mean()
            scaler.scale(loss).backward()
            if ni - last_opt_step >= accumulate:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
                last_opt_step = ni
            ni += 1
        scheduler.step()
