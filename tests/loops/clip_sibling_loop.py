"""Models trained side by side: one loop scales each model's backward, a later loop clips and steps each
model through its scaler, never unscaling; returns the norms clip_grad_norm_ reported."""
import torch


def train(model, optimizer, scaler, batches, max_norm):
    norms = []
    models, optimizers, scalers = [model], [optimizer], [scaler]
    for x in batches:
        losses = [each(x).pow(2).mean() for each in models]
        for each_scaler, loss in zip(scalers, losses):
            each_scaler.scale(loss).backward()
        for each, each_optimizer, each_scaler in zip(models, optimizers, scalers):
            norms.append(float(torch.nn.utils.clip_grad_norm_(each.parameters(), max_norm)))
            each_scaler.step(each_optimizer)
            each_scaler.update()
            each_optimizer.zero_grad()
    return norms
