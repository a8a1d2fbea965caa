"""An EMA of the weights updated every micro-batch while the optimizer updates once per window."""
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def train(model, optimizer, batches, accum, decay):
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))
    for i, x in enumerate(batches):
        (model(x).pow(2).mean() / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        ema.update_parameters(model)
    return ema
