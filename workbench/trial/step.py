"""One training step of a trial rank: its data, forward and backward over the microbatches (or
through the pipeline schedule), and the gradient fix-ups the optimizer step needs."""
from __future__ import annotations

import contextlib

import torch
from torch.distributed.tensor.parallel import loss_parallel

from workbench.process_runner import Phase
from workbench.scenario.types import Scenario
from workbench.trial.build import Rank, loss_fn
from workbench.trial.context_parallel import sequence_chunk
from workbench.trial.expert_parallel import reduce_expert_grads
from workbench.trial.parallelize import finalize_tp_grads
from workbench.trial.pipeline import sync_tied_grads


def step_data(s: Scenario, step: int, seed: int, dp_rank: int) -> torch.Tensor:
    """Data-parallel rank ``dp_rank``'s tokens of step ``step``: (micro_batch x microbatches,
    seq_len + 1), inputs and shifted labels; the single-process reference draws the same."""
    tr = s.training
    gen = torch.Generator().manual_seed(seed + 1000 * step + dp_rank)
    return torch.randint(0, s.model.vocab, (tr.micro_batch * s.microbatches, tr.seq_len + 1),
                         generator=gen)


def batch(rank: Rank, step: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's (tokens, labels) of step ``step``: its data-parallel rank's, and under CP one
    contiguous chunk of every sequence."""
    data = step_data(rank.scenario, step, seed, rank.dp_rank).to(rank.compute.device)
    tokens, labels = data[:, :-1], data[:, 1:]
    cp = rank.scenario.parallel.cp
    if cp > 1:
        tokens = sequence_chunk(tokens, rank.cp_rank, cp)
        labels = sequence_chunk(labels, rank.cp_rank, cp)
    return tokens, labels


def forward_backward(rank: Rank, tokens: torch.Tensor, labels: torch.Tensor) -> list[float]:
    """Forward and backward of every microbatch; the losses this rank computes (none on a
    pipeline rank without the last stage). Gradients accumulate as a mean over microbatches.
    With TP the vocabulary-sharded logits go through ``loss_parallel``."""
    s = rank.scenario
    par, mbs = s.parallel, s.microbatches
    with loss_parallel() if par.tp > 1 else contextlib.nullcontext():
        if rank.schedule is not None:
            return _pipelined(rank, tokens, labels)
        model = rank.wrapped[0]
        losses = []
        for i in range(mbs):
            sl = slice(i * s.training.micro_batch, (i + 1) * s.training.micro_batch)
            with _sync_context(model, last=i == mbs - 1):
                with rank.compute.autocast():      # the forward only (PyTorch's AMP recipe)
                    logits = model(tokens[sl])
                loss = loss_fn(logits, labels[sl]) / mbs
                del logits
                loss.backward()
            losses.append(_scalar(loss) * mbs)
        return losses


def _pipelined(rank: Rank, tokens: torch.Tensor, labels: torch.Tensor) -> list[float]:
    """One step of the pipeline schedule: the first stage feeds the tokens, the last computes
    the losses."""
    par, mbs = rank.scenario.parallel, rank.scenario.microbatches
    out_losses: list = []
    kwargs = {}
    if (par.pp * par.chunks_per_rank - 1) in rank.chunks:
        kwargs.update(target=labels, losses=out_losses)
    if 0 in rank.chunks:
        rank.schedule.step(tokens, **kwargs)
    else:
        rank.schedule.step(**kwargs)
    losses = [_scalar(x) for x in out_losses]
    if rank.shared_tied:     # the schedule did not scale the gradients (build.py says why)
        for p in rank.params:
            if p.grad is not None:
                p.grad.div_(mbs)
    return losses


def finish_gradients(rank: Rank, phase: Phase, step: int) -> None:
    """What the gradients need after backward and before the optimizer: tensor-parallel layouts
    (unless FSDP2 brings them), the tied embedding's copies summed across pipeline stages, the
    experts' reduction over their expert-data-parallel group (unless FSDP2 does it)."""
    par = rank.scenario.parallel
    if par.tp > 1 and not rank.compute.fsdp:
        phase.value = f"step {step}: tensor-parallel gradient layouts"
        finalize_tp_grads(rank.params)
    if rank.tied:
        phase.value = f"step {step}: tied-embedding gradient sum"
        sync_tied_grads(rank.modules, rank.tied_group)
    if par.ep > 1 and par.zero < 2:
        phase.value = f"step {step}: expert gradient reduction"
        reduce_expert_grads(rank.modules, rank.edp_group, par.dp * par.cp)


def _scalar(loss: torch.Tensor) -> float:
    loss = loss.detach()
    return float(loss.full_tensor() if hasattr(loss, "full_tensor") else loss)


def _sync_context(model, last: bool):
    """DDP reduces gradients once per step (``no_sync`` on all but the last microbatch);
    FSDP2 reduce-scatters after every microbatch, as torchtitan's gradient accumulation does
    (the estimator counts the same)."""
    if hasattr(model, "no_sync") and not last:
        return model.no_sync()
    return contextlib.nullcontext()
