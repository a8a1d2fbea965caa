"""How steplint's cost grows with the size of one module: seconds per 1,000 lines for K training functions.

    python benchmarks/growth.py [K ...]          (default: 8 16 32 64)

Each generated function is a whole training step: AMP with a GradScaler, an accumulation window,
a scheduler, update counters, an evaluation cadence, a checkpoint save and a resume. Every one of
them holds the same defects, so the diagnostics must grow with K exactly as the lines do. Linear cost
shows as flat seconds per 1,000 lines. A benchmark, not a test: the figures depend on the machine.
"""

import sys
import time

HEADER = """import torch
from torch.optim.lr_scheduler import LambdaLR


def evaluate(model, loader):
    model.eval()
    return 0.0

"""

TRAINING_FUNCTION = """
def train_{k}(model, loader, max_steps, accum_steps, save_every, eval_every, path):
    optimizer_{k} = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler_{k} = LambdaLR(optimizer_{k}, lambda step: min(1.0, (step + 1) / 100))
    scaler_{k} = torch.amp.GradScaler("cuda")
    global_step = 0
    seen_batches = 0
    if path is not None:
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint["model"])
        optimizer_{k}.load_state_dict(checkpoint["optimizer"])
    for epoch in range(3):
        for i, (inputs, targets) in enumerate(loader):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(inputs), targets) / accum_steps
            scaler_{k}.scale(loss).backward()
            seen_batches += 1
            if (i + 1) % accum_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler_{k}.step(optimizer_{k})
                scaler_{k}.update()
                optimizer_{k}.zero_grad()
                scheduler_{k}.step()
                global_step += 1
                if global_step % eval_every == 0:
                    evaluate(model, loader)
            if i % save_every == 0:
                torch.save({{"model": model.state_dict(), "optimizer": optimizer_{k}.state_dict(), "step": global_step}}, f"ckpt_{{i}}.pt")
            if global_step >= max_steps:
                return global_step
    return global_step
"""


def module(functions: int) -> str:
    return HEADER + "".join(TRAINING_FUNCTION.format(k=k) for k in range(functions))


def measure(text: str):
    from steplint.config import Settings
    from steplint.engine import lint_source

    settings = Settings()
    start = time.perf_counter()
    found = lint_source("growth.py", text, settings)
    return time.perf_counter() - start, len(found)


def main(sizes):
    measure(module(1))  # imports and the rule registry, outside the figures
    from steplint.engine import collect_garbage_rarely

    collect_garbage_rarely()  # as `steplint check` and the server run
    print(f"{'K':>4} {'lines':>7} {'seconds':>9} {'s/1k lines':>11} {'diagnostics':>12} {'per K':>6}")
    for functions in sizes:
        text = module(functions)
        lines = text.count("\n")
        seconds, found = measure(text)
        print(f"{functions:>4} {lines:>7} {seconds:>9.2f} {seconds / lines * 1000:>11.3f} {found:>12} {found / functions:>6.1f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [8, 16, 32, 64])
