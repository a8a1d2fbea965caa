"""A checkpoint every N batches under accumulation, named by the batch index."""
import torch


def train(model, optimizer, batches, accum, save_every, out_dir):
    for i, x in enumerate(batches):
        (model(x).pow(2).mean() / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        if (i + 1) % save_every == 0:
            torch.save({"model": model.state_dict()}, f"{out_dir}/ckpt-{i + 1}.pt")


def resume(path, model, optimizer):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["step"]
