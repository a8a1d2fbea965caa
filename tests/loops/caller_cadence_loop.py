"""fairseq-style: the update counter advances in the trainer's step, and the caller keys validation
and checkpoints to it. Returns the counter values validation and checkpoints ran at."""
import torch


class Trainer:
    def __init__(self, model, optimizer, scaler):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.num_updates = 0

    def train_step(self, x):
        self.scaler.scale(self.model(x).pow(2).mean()).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        self.num_updates += 1
        for group in self.optimizer.param_groups:
            group["lr"] = 0.1 * min(1.0, self.num_updates / 10)


def train(trainer, batches, validate_every, save_every, out_dir):
    validated, saved = [], []
    for x in batches:
        trainer.train_step(x)
        if trainer.num_updates % validate_every == 0:
            validated.append(trainer.num_updates)
        if trainer.num_updates % save_every == 0:
            torch.save(trainer.model.state_dict(), f"{out_dir}/checkpoint_{trainer.num_updates}.pt")
            saved.append(trainer.num_updates)
    return validated, saved
