"""SL402's fix, proven with real torch.distributed: two gloo ranks on CPU, the model in DDP, each
loop run as written and after `steplint check --fix`. One spawn of two processes runs both versions
(each process spends most of its time importing torch)."""

import itertools
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from test_runtime_fix import BASE_LR, LOOPS, WARMUP, fixed_copy, load, warmup

WORLD = 2
BATCHES = 8
FUNCTIONS = ["train", "train_logged", "train_counted"]  # the statement alone, first, last in the rank block


def _ranked_run(rank, loop_paths, out_dir):
    """On one rank: each function of each loop on this rank's batches; saves the LR each update
    used and the final parameters, per (loop, function)."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/rendezvous", rank=rank, world_size=WORLD, timeout=timedelta(seconds=60))
    torch.manual_seed(100 + rank)  # each rank its own data
    batches = [torch.randn(8, 4) for _ in range(BATCHES)]
    results = {}
    for (label, loop_path), function in itertools.product(loop_paths.items(), FUNCTIONS):
        module = load(Path(loop_path))
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
        used = []
        optimizer.register_step_pre_hook(lambda opt, *_: used.append(opt.param_groups[0]["lr"]))
        if function == "train_counted":
            module.train_counted(model, optimizer, batches, BASE_LR, WARMUP)
        else:
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
            extra = ([],) if function == "train_logged" else ()
            getattr(module, function)(model, optimizer, scheduler, batches, *extra)
        results[label, function] = (used, [p.detach().clone() for p in model.parameters()])
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    # Both ranks done before either tears the group down: a rank whose peer closed the connection
    # while gloo still talked to it can abort at exit ("terminate called without an active exception").
    dist.barrier()
    dist.destroy_process_group()


def _run_on_two_ranks(loop_paths, out_dir):
    mp.spawn(_ranked_run, args=({k: str(v) for k, v in loop_paths.items()}, str(out_dir)), nprocs=WORLD, join=True)
    return [torch.load(out_dir / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.runtime
def test_schedule_moved_out_of_the_rank_condition_agrees_across_ranks(tmp_path):
    intended = pytest.approx([BASE_LR * warmup(k) for k in range(BATCHES)])
    fixed = fixed_copy(tmp_path, "rank_schedule_loop.py", unsafe=False)
    rank0, rank1 = _run_on_two_ranks({"unfixed": LOOPS / "rank_schedule_loop.py", "fixed": fixed}, tmp_path)
    for function in FUNCTIONS:
        before0, before1 = rank0["unfixed", function], rank1["unfixed", function]
        assert before0[0] == intended
        assert before1[0] == pytest.approx([BASE_LR * warmup(0)] * BATCHES)  # rank 1 never warms up
        assert not all(torch.equal(a, b) for a, b in zip(before0[1], before1[1]))  # the replicas drift apart

        after0, after1 = rank0["fixed", function], rank1["fixed", function]
        assert after0[0] == after1[0] == intended
        assert all(torch.equal(a, b) for a, b in zip(after0[1], after1[1]))
