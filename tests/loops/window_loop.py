"""Accumulation windows tested as `step % accum == 0`, with the index and a counter from 0."""


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
