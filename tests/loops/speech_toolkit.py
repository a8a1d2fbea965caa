"""A toolkit's own accelerator: it wraps the scaled backward and the step, and is not a GradScaler
(no `is_enabled()`, no found-inf record of its own). The wrapper loop imports it."""
import torch


class Accelerator:
    def __init__(self, amp):
        self._scaler = torch.amp.GradScaler("cpu", enabled=amp)

    def backward(self, loss):
        self._scaler.scale(loss).backward()

    def step(self, optimizer):
        self._scaler.step(optimizer)

    def update(self):
        self._scaler.update()
