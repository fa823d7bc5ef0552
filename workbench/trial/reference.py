"""The single-process reference a trial is checked against: the same model, initial weights,
data and optimizer in one process, gradients accumulated over every data-parallel rank's
microbatches. Losses per step (after each optimizer step's update) must match the trial."""
from __future__ import annotations


def reference_losses(trial, steps: int, seed: int = 1234) -> list[float]:
    import torch

    from workbench.trial.adapters import apply_method
    from workbench.trial.build import loss_fn
    from workbench.trial.model import Transformer, init_weights
    from workbench.trial.parallelize import make_optimizer
    from workbench.trial.step import step_data

    torch.manual_seed(seed)
    par, tr, m = trial.parallel, trial.training, trial.model
    model = Transformer(m)
    init_weights(model, seed)
    apply_method(model, tr, seed)
    single = type(par)(dp=1)          # a plain optimizer: no ZeRO, one rank
    opt = make_optimizer(model, single, None, tr.optimizer)
    mbs = trial.microbatches
    out = []
    for step in range(steps):
        batches = [step_data(trial, step, seed, dp_rank) for dp_rank in range(par.dp)]
        total = 0.0
        n = par.dp * mbs
        for data in batches:
            for i in range(mbs):
                chunk = data[i * tr.micro_batch:(i + 1) * tr.micro_batch]
                loss = loss_fn(model(chunk[:, :-1]), chunk[:, 1:])
                (loss / n).backward()
                total += float(loss.detach())
        out.append(total / n)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return out
