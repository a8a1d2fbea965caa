"""Accumulation windows tested as `step % accum == 0` with the index and a counter from 0, and the
mirror form `(step + 1) % accum == 0` with them from 1."""


def train(model, optimizer, batches, accum):
    for step, x in enumerate(batches):
        loss = model(x).pow(2).mean() / accum
        loss.backward()
        if step % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def train_counted(model, optimizer, batches, accum):
    micro = 0
    for x in batches:
        (model(x).pow(2).mean() / accum).backward()
        if micro % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        micro += 1


def _micro_step(model, x, scaler, accum):
    scaler.scale(model(x).pow(2).mean() / accum).backward()


def _apply_update(optimizer, scaler):
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()


def train_through_helpers(model, optimizer, batches, accum):
    """The micro-batch's scaled backward and the update each in a helper of the module."""
    import torch

    scaler = torch.amp.GradScaler("cpu", init_scale=1.0, growth_interval=10**6)
    for step, x in enumerate(batches):
        _micro_step(model, x, scaler, accum)
        if step % accum == 0:
            _apply_update(optimizer, scaler)


def train_counted_first(model, optimizer, batches, accum):
    """The mirror form: the counter advanced at the top of the pass (from 1), the test shifted by one more."""
    micro = 0
    for x in batches:
        micro += 1
        (model(x).pow(2).mean() / accum).backward()
        if (micro + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def train_from_one(model, optimizer, batches, accum):
    for step, x in enumerate(batches, 1):
        (model(x).pow(2).mean() / accum).backward()
        if (step + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def train_by_position(model, optimizer, batches, accum):
    """The window tested on the micro-batch's position in the run (`i + epoch * len(loader)`), over two epochs."""
    epochs = [batches[: len(batches) // 2], batches[len(batches) // 2 :]]
    for epoch in range(len(epochs)):
        loader = epochs[epoch]
        for i, x in enumerate(loader):
            position = i + epoch * len(loader)
            (model(x).pow(2).mean() / accum).backward()
            if position % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
