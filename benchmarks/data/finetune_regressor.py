"""Fine-tune a small MLP regressor with mixed precision, warmup and periodic checkpoints.

A training script of the everyday shape (arguments, data, model, loop, evaluation, checkpoints),
used by benchmarks/server_latency.py as the document an editor would have open. Its scheduler
steps after `scaler.step` without a commit gate, so steplint reports SL101 in it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

log = logging.getLogger("finetune")


# --- configuration ---------------------------------------------------------------------------


@dataclass
class TrainConfig:
    features: int = 32
    hidden: int = 128
    depth: int = 3
    dropout: float = 0.1
    lr: float = 3e-4
    weight_decay: float = 0.01
    warmup_updates: int = 200
    total_updates: int = 5000
    batch_size: int = 64
    epochs: int = 10
    grad_clip: float = 1.0
    eval_every: int = 500
    save_every: int = 1000
    output_dir: str = "runs/regressor"
    seed: int = 1234
    device: str = "cuda"
    amp_dtype: str = "float16"
    tags: List[str] = field(default_factory=list)

    @classmethod
    def from_args(cls, argv: Optional[List[str]] = None) -> "TrainConfig":
        parser = argparse.ArgumentParser(description=__doc__)
        for name, default in cls().__dict__.items():
            if isinstance(default, list):
                parser.add_argument(f"--{name.replace('_', '-')}", nargs="*", default=default)
            else:
                parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
        return cls(**vars(parser.parse_args(argv)))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# --- data --------------------------------------------------------------------------------------


class SyntheticRegression(Dataset):
    """Targets are a fixed random projection of the inputs plus a little noise."""

    def __init__(self, size: int, features: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.inputs = torch.randn(size, features, generator=generator)
        projection = torch.randn(features, 1, generator=generator) / math.sqrt(features)
        noise = 0.05 * torch.randn(size, 1, generator=generator)
        self.targets = self.inputs @ projection + noise

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]


def make_loaders(config: TrainConfig) -> Tuple[DataLoader, DataLoader]:
    train = SyntheticRegression(20_000, config.features, config.seed)
    valid = SyntheticRegression(2_000, config.features, config.seed + 1)
    train_loader = DataLoader(train, batch_size=config.batch_size, shuffle=True, drop_last=True)
    valid_loader = DataLoader(valid, batch_size=config.batch_size * 4)
    return train_loader, valid_loader


# --- model -------------------------------------------------------------------------------------


class ResidualBlock(nn.Module):
    def __init__(self, width: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.inner = nn.Linear(width, width * 2)
        self.outer = nn.Linear(width * 2, width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.inner(self.norm(x))
        y = self.outer(F.gelu(y))
        return x + self.dropout(y)


class Regressor(nn.Module):
    def __init__(self, config: TrainConfig) -> None:
        super().__init__()
        self.embed = nn.Linear(config.features, config.hidden)
        self.blocks = nn.ModuleList(ResidualBlock(config.hidden, config.dropout) for _ in range(config.depth))
        self.head = nn.Linear(config.hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def parameter_groups(model: nn.Module, weight_decay: float) -> List[Dict[str, object]]:
    """No weight decay on biases and norms, as usual."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if parameter.ndim < 2 or "norm" in name else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_then_cosine(warmup: int, total: int):
    def factor(update: int) -> float:
        if update < warmup:
            return (update + 1) / warmup
        progress = (update - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


# --- metrics -----------------------------------------------------------------------------------


class RunningMean:
    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def add(self, value: float, weight: int = 1) -> None:
        self.total += value * weight
        self.count += weight

    @property
    def value(self) -> float:
        return self.total / max(1, self.count)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> Dict[str, float]:
    model.eval()
    mse, mae = RunningMean(), RunningMean()
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        predictions = model(inputs).float()
        mse.add(F.mse_loss(predictions, targets).item(), len(inputs))
        mae.add(F.l1_loss(predictions, targets).item(), len(inputs))
    model.train()
    return {"mse": mse.value, "mae": mae.value}


def write_metrics(path: str, metrics: Dict[str, float], update: int) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"update": update, **metrics}) + "\n")


# --- checkpoints -------------------------------------------------------------------------------


def save_checkpoint(path: str, model, optimizer, scheduler, scaler, update: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "update": update,
    }
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def latest_checkpoint(folder: str) -> Optional[str]:
    if not os.path.isdir(folder):
        return None
    names = sorted(n for n in os.listdir(folder) if n.startswith("update-") and n.endswith(".pt"))
    return os.path.join(folder, names[-1]) if names else None


# --- training ----------------------------------------------------------------------------------


def batches(loader: DataLoader, epochs: int) -> Iterator[Tuple[int, Tuple[torch.Tensor, torch.Tensor]]]:
    for epoch in range(epochs):
        for batch in loader:
            yield epoch, batch


def train(config: TrainConfig) -> Dict[str, float]:
    seed_everything(config.seed)
    device = torch.device(config.device if torch.cuda.is_available() else "cpu")
    dtype = torch.float16 if config.amp_dtype == "float16" else torch.bfloat16
    train_loader, valid_loader = make_loaders(config)

    model = Regressor(config).to(device)
    optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr)
    scheduler = LambdaLR(optimizer, warmup_then_cosine(config.warmup_updates, config.total_updates))
    scaler = torch.amp.GradScaler(device.type)

    update = 0
    resume_from = latest_checkpoint(config.output_dir)
    if resume_from is not None:
        state = torch.load(resume_from, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        update = state["update"]
        log.info("resumed from %s at update %d", resume_from, update)

    metrics_path = os.path.join(config.output_dir, "metrics.jsonl")
    train_loss = RunningMean()
    started = time.perf_counter()
    best: Dict[str, float] = {"mse": float("inf")}

    model.train()
    for epoch, (inputs, targets) in batches(train_loader, config.epochs):
        if update >= config.total_updates:
            break
        inputs, targets = inputs.to(device), targets.to(device)
        with torch.autocast(device.type, dtype=dtype):
            predictions = model(inputs)
            loss = F.mse_loss(predictions.float(), targets)

        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        update += 1
        train_loss.add(loss.item(), len(inputs))

        if update % config.eval_every == 0:
            metrics = evaluate(model, valid_loader, device)
            metrics["train_mse"] = train_loss.value
            metrics["lr"] = scheduler.get_last_lr()[0]
            metrics["seconds"] = time.perf_counter() - started
            write_metrics(metrics_path, metrics, update)
            log.info("epoch %d update %d: %s", epoch, update, metrics)
            train_loss = RunningMean()
            if metrics["mse"] < best["mse"]:
                best = metrics
                save_checkpoint(os.path.join(config.output_dir, "best.pt"), model, optimizer, scheduler, scaler, update)

        if update % config.save_every == 0:
            name = f"update-{update:08d}.pt"
            save_checkpoint(os.path.join(config.output_dir, name), model, optimizer, scheduler, scaler, update)

    final = evaluate(model, valid_loader, device)
    write_metrics(metrics_path, final, update)
    return {"best_mse": best["mse"], "final_mse": final["mse"], "updates": float(update)}


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = TrainConfig.from_args(argv)
    os.makedirs(config.output_dir, exist_ok=True)
    with open(os.path.join(config.output_dir, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(config.__dict__, handle, indent=2)
    summary = train(config)
    log.info("done: %s", summary)


if __name__ == "__main__":
    main()
