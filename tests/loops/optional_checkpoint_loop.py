"""A trainer whose scaler exists only with AMP; its checkpoint holds only the model and optimizer."""
import torch
from steplint.runtime import committed_step


class Trainer:
    def __init__(self, model, amp):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 10))
        self.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10) if amp else None

    def train(self, batches):
        for x in batches:
            loss = self.model(x).pow(2).mean()
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                committed = committed_step(self.scaler, self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                self.optimizer.step()
                committed = True
            self.optimizer.zero_grad()
            if committed:
                self.scheduler.step()

    def save(self, path):
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, path)

    def load(self, path):
        checkpoint = torch.load(path)
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
