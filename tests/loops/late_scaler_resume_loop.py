"""Resumes before the scaler exists: `main` builds it after the resume, and the trainer builds it in
`before_train_loop()`, after `__init__` resumed. Both save it with the checkpoint."""
import torch


def main(model, batches, resume=None, save=None, amp=True):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if resume:
        checkpoint = torch.load(resume)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    scaler = torch.amp.GradScaler("cpu", enabled=amp)
    for x in batches:
        scaler.scale(model(x).pow(2).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    if save:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, save)
    return scaler


class Trainer:
    def __init__(self, model, resume=None, amp=True):
        self.model = model
        self.amp = amp
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        if resume:
            checkpoint = torch.load(resume)
            self.model.load_state_dict(checkpoint["model"])
            self.optimizer.load_state_dict(checkpoint["optimizer"])

    def before_train_loop(self):
        self.scaler = torch.amp.GradScaler("cpu", enabled=self.amp)

    def train(self, batches):
        self.before_train_loop()
        for x in batches:
            self.scaler.scale(self.model(x).pow(2).mean()).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()

    def save(self, path):
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict()}, path)
