"""Checkpoints every N updates under accumulation, named and stored by the batch index, after the
update counter advanced. Returns the counter at each save."""
import torch


def train(model, optimizer, batches, accum, save_every, out_dir):
    global_step = 0
    saved = []
    for i, x in enumerate(batches):
        (model(x).pow(2).mean() / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            global_step += 1
            if global_step % save_every == 0:
                path = f"{out_dir}/ckpt-{i}.pt"
                torch.save({"model": model.state_dict(), "step": i + 1}, path)
                saved.append(global_step)
    return saved


def resume(path, model, optimizer):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["step"]
