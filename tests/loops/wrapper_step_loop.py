"""A trainer that steps through a toolkit's accelerator, a wrapper with a `step` of its own."""
import torch
from speech_toolkit import Accelerator


class Trainer:
    def __init__(self, model, amp):
        self.model = model
        self.accel = Accelerator(amp=amp)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 10))

    def train(self, batches):
        for x in batches:
            loss = self.model(x).pow(2).mean()
            self.accel.backward(loss)
            self.accel.step(self.optimizer)
            self.accel.update()
            self.scheduler.step()
            self.optimizer.zero_grad()
