"""A typical mixed-precision fine-tuning script. `steplint check examples/` reports what is wrong here, and `--fix` repairs it."""
import torch
from torch.optim.lr_scheduler import OneCycleLR

accum_steps = 4
total_updates = 1_000

model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
scheduler = OneCycleLR(optimizer, max_lr=3e-4, total_steps=total_updates)
scaler = torch.amp.GradScaler("cuda")
loader = [(torch.randn(32, 128), torch.randint(0, 10, (32,))) for _ in range(64)]

global_step = 0
for epoch in range(100):
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
        scaler.scale(loss).backward()
        if (i + 1) % accum_steps == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            global_step += 1
            if global_step % 250 == 0:
                torch.save({"model": model.state_dict(), "step": global_step}, f"checkpoint-{global_step}.pt")
        scheduler.step()
        if global_step >= total_updates:
            break
