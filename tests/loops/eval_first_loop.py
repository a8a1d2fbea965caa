"""nanoGPT-style: `while True`, the evaluation and checkpoint at the top of the loop read the
iteration counter, the LR is computed from it, and the counter advances after the update."""
import torch


def get_lr(it, base_lr=0.1, warmup=10):
    return base_lr * min(1.0, (it + 1) / warmup)


def train(model, optimizer, scaler, get_batch, max_iters, eval_interval, out_dir):
    iter_num = 0
    evaluated = []
    while True:
        lr = get_lr(iter_num)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if iter_num % eval_interval == 0:
            evaluated.append(iter_num)
            torch.save({"model": model.state_dict(), "iter_num": iter_num}, f"{out_dir}/ckpt.pt")
        loss = model(get_batch()).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        if iter_num > max_iters:
            break
    return iter_num, evaluated
