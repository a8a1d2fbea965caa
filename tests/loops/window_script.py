"""A script's top-level loop: a counter set to 0 and advanced at the top of every pass, tested as
`(passes + 1) % accum`, so the first window is one micro-batch short. The inputs come from the module
`script_inputs`, which the test fills before running the script."""
from script_inputs import accum, batches, model, optimizer

passes = 0
for x in batches:
    passes += 1
    (model(x).pow(2).mean() / accum).backward()
    if (passes + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
