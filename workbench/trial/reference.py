"""The single-process reference a trial is checked against: the same model, initial weights,
data and optimizer in one process, gradients accumulated over every data-parallel rank's
microbatches. Losses per step (after each optimizer step's update) must match the trial."""
from __future__ import annotations


def reference_losses(trial, steps: int, seed: int = 1234) -> list[float]:
    import torch
    import torch.nn.functional as F

    from workbench.trial.model import Transformer, init_weights
    from workbench.trial.parallelize import make_optimizer

    torch.manual_seed(seed)
    par, tr, m = trial.parallel, trial.training, trial.model
    model = Transformer(m)
    init_weights(model, seed)
    single = type(par)(dp=1)          # a plain optimizer: no ZeRO, one rank
    opt = make_optimizer(model, single, None, tr.optimizer)
    mbs = trial.microbatches
    out = []
    for step in range(steps):
        batches = []
        for dp_rank in range(par.dp):
            gen = torch.Generator().manual_seed(seed + 1000 * step + dp_rank)
            batches.append(torch.randint(0, m.vocab, (tr.micro_batch * mbs, tr.seq_len + 1),
                                         generator=gen))
        total = 0.0
        n = par.dp * mbs
        for data in batches:
            for i in range(mbs):
                chunk = data[i * tr.micro_batch:(i + 1) * tr.micro_batch]
                logits = model(chunk[:, :-1])
                loss = F.cross_entropy(logits.flatten(0, 1).float(), chunk[:, 1:].flatten())
                (loss / n).backward()
                total += float(loss.detach())
        out.append(total / n)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return out
