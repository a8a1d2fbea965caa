"""A trainer whose scaler, optimizer and scheduler are built in `before_train_loop()`, not in `__init__`."""
import torch


class Trainer:
    def __init__(self, model, amp=True):
        self.model = model
        self.amp = amp

    def before_train_loop(self):
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 10))
        self.scaler = torch.amp.GradScaler("cpu", enabled=self.amp)

    def train_one_iter(self, x):
        loss = self.model(x).pow(2).mean()
        self.optimizer.zero_grad()
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()

    def train(self, batches):
        self.before_train_loop()
        for x in batches:
            self.train_one_iter(x)
