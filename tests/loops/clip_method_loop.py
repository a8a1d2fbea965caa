"""A trainer whose `backward()` scales the loss and whose `update()` clips before stepping through
the scaler, never unscaling; returns the norms clip_grad_norm_ reported."""
import torch


class Trainer:
    def __init__(self, model, optimizer, scaler, max_norm):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.max_norm = max_norm
        self.norms = []

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def update(self):
        self.norms.append(float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()


def train(model, optimizer, scaler, batches, max_norm):
    trainer = Trainer(model, optimizer, scaler, max_norm)
    for x in batches:
        trainer.backward(model(x).pow(2).mean())
        trainer.update()
    return trainer.norms
