"""A trainer whose checkpoint holds only the model and optimizer; the resume runtime test uses it."""
import torch
from steplint.runtime import committed_step


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 10))
        self.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=100)
        self.global_step = 0

    def train(self, batches, max_updates):
        for x in batches:
            loss = self.model(x).pow(2).mean()
            self.scaler.scale(loss).backward()
            committed = committed_step(self.scaler, self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()
            if committed:
                self.scheduler.step()
                self.global_step += 1
            if self.global_step >= max_updates:
                break

    def save(self, path):
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, path)

    def load(self, path):
        checkpoint = torch.load(path)
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
