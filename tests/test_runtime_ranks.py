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


def _ranked_run(rank, job, loop_paths, out_dir):
    """On one rank: `job(rank, loop_paths)` in a gloo group of two, its results saved for the test."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/rendezvous", rank=rank, world_size=WORLD, timeout=timedelta(seconds=60))
    torch.manual_seed(100 + rank)  # each rank its own data
    results = job(rank, loop_paths)
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    # Both ranks done before either tears the group down: a rank whose peer closed the connection
    # while gloo still talked to it can abort at exit ("terminate called without an active exception").
    dist.barrier()
    dist.destroy_process_group()


def _run_on_two_ranks(job, loop_paths, out_dir):
    mp.spawn(_ranked_run, args=(job, {k: str(v) for k, v in loop_paths.items()}, str(out_dir)), nprocs=WORLD, join=True)
    return [torch.load(out_dir / f"rank{r}.pt") for r in range(WORLD)]


def _schedules(rank, loop_paths):
    """Each function of each loop on this rank's batches: the LR each update used and the final
    parameters, per (loop, function)."""
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
    return results


@pytest.mark.runtime
def test_schedule_moved_out_of_the_rank_condition_agrees_across_ranks(tmp_path):
    intended = pytest.approx([BASE_LR * warmup(k) for k in range(BATCHES)])
    fixed = fixed_copy(tmp_path, "rank_schedule_loop.py", unsafe=False)
    rank0, rank1 = _run_on_two_ranks(_schedules, {"unfixed": LOOPS / "rank_schedule_loop.py", "fixed": fixed}, tmp_path)
    for function in FUNCTIONS:
        before0, before1 = rank0["unfixed", function], rank1["unfixed", function]
        assert before0[0] == intended
        assert before1[0] == pytest.approx([BASE_LR * warmup(0)] * BATCHES)  # rank 1 never warms up
        assert not all(torch.equal(a, b) for a, b in zip(before0[1], before1[1]))  # the replicas drift apart

        after0, after1 = rank0["fixed", function], rank1["fixed", function]
        assert after0[0] == after1[0] == intended
        assert all(torch.equal(a, b) for a, b in zip(after0[1], after1[1]))


ACCUM = 4


def _windows(rank, loop_paths):
    """Each loop on this rank's batches: at every optimizer step, the micro-batches seen so far and
    this rank's gradients."""
    batches = [torch.randn(8, 4) for _ in range(BATCHES)]
    results = {}
    for label, loop_path in loop_paths.items():
        module = load(Path(loop_path))
        torch.manual_seed(0)
        inner = torch.nn.Linear(4, 1)
        seen = [0]
        inner.register_forward_pre_hook(lambda *_: seen.__setitem__(0, seen[0] + 1))
        model = torch.nn.parallel.DistributedDataParallel(inner)
        optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
        steps = []
        optimizer.register_step_pre_hook(lambda opt, *_: steps.append((seen[0], [p.grad.clone() for p in model.parameters()])))
        module.train(model, optimizer, batches, ACCUM)
        results[label] = steps
    return results


@pytest.mark.runtime
def test_window_fix_moves_the_no_sync_test_with_the_boundary(tmp_path):
    fixed = fixed_copy(tmp_path, "no_sync_loop.py", unsafe=False)
    rank0, rank1 = _run_on_two_ranks(_windows, {"unfixed": LOOPS / "no_sync_loop.py", "fixed": fixed}, tmp_path)
    before0, before1 = rank0["unfixed"], rank1["unfixed"]
    assert [seen for seen, _ in before0] == [1, 5]  # a first window of one micro-batch
    assert all(torch.equal(a, b) for (_, g0), (_, g1) in zip(before0, before1) for a, b in zip(g0, g1))  # reduced at the step

    after0, after1 = rank0["fixed"], rank1["fixed"]
    assert [seen for seen, _ in after0] == [ACCUM, 2 * ACCUM]  # whole windows
    # the gradients were all-reduced on the micro-batch the optimizer steps on: equal on both ranks
    assert all(torch.equal(a, b) for (_, g0), (_, g1) in zip(after0, after1) for a, b in zip(g0, g1))
