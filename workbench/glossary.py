"""The words a non-coder meets on the page and in the labs, each in one or two plain sentences.

One table (``GLOSSARY``) that the dashboard's tooltips, its "what the words mean" box and the
teaching labs share; ``explain(term)`` looks a term up by any of its spellings ("tp", "TP",
"tensor parallel")."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    name: str          # as the page writes it: "TP"
    long: str          # its full name: "tensor parallelism"
    meaning: str       # one or two plain sentences
    aliases: tuple[str, ...] = ()


GLOSSARY: dict[str, Term] = {t.name.lower(): t for t in (
    Term("TP", "tensor parallelism",
         "Each layer's weight matrices are split across GPUs, which work on every token "
         "together and exchange partial results inside every layer. Needs a fast link "
         "(NVLink): keep it inside one node.", ("tensor", "tensor parallel")),
    Term("PP", "pipeline parallelism",
         "The layers are cut into stages, one stage per group of GPUs; micro-batches flow "
         "through the stages like an assembly line. Cheap on links, but stages wait at the "
         "start and end of each step (the bubble).", ("pipeline", "pipeline parallel")),
    Term("DP", "data parallelism",
         "Every GPU (or group) holds the whole model and trains on different examples; the "
         "gradients are averaged after each step. It fills whatever GPUs the other degrees "
         "leave.", ("data", "data parallel")),
    Term("ZeRO", "Zero Redundancy Optimizer",
         "Data parallelism without keeping a full copy everywhere: stage 1 splits the "
         "optimizer states across the GPUs, stage 2 also the gradients, stage 3 (FSDP) also "
         "the weights. Less memory per GPU, more communication.", ("fsdp", "zero stage")),
    Term("SP", "sequence parallelism",
         "With TP, the parts of a layer that TP does not split (norms, dropout) are split "
         "along the sequence instead, so their activations are not stored on every TP GPU.",
         ("sequence parallel",)),
    Term("CP", "context parallelism",
         "Very long sequences are cut into pieces on different GPUs; attention passes keys "
         "and values around a ring. Needed when one sequence's activations do not fit.",
         ("context", "context parallel")),
    Term("EP", "expert parallelism",
         "In a mixture-of-experts model, different GPUs hold different experts and send each "
         "token to the GPU of the expert it is routed to.", ("expert", "expert parallel")),
    # Megatron-Core's "MoE parallel folding" (Liu et al., arXiv:2504.14960; Megatron-Core
    # --expert-tensor-parallel-size): the experts get their own TP width, independent of the
    # attention's
    Term("Expert TP", "expert tensor parallelism",
         "How many GPUs split each expert's weight matrices, set apart from the TP of the "
         "attention layers: often 1, so each expert sits whole on one GPU and the GPUs TP "
         "frees serve expert parallelism instead.", ("expert_tp", "expert tensor parallel")),
    Term("MFU", "model FLOPs utilisation",
         "The share of the GPUs' peak arithmetic speed that goes into the model's own "
         "computation. 40-55 % is good for large models; the rest is lost to communication, "
         "memory traffic, recompute and waiting.", ("model flops utilization",)),
    Term("Micro-batch", "micro-batch",
         "How many sequences one GPU processes in one forward and backward pass. Several "
         "micro-batches are accumulated into one optimizer step (the global batch).",
         ("micro_batch", "microbatch", "mb")),
    Term("Bubble", "pipeline bubble",
         "The time pipeline stages sit idle at the start and end of each step, waiting for "
         "the first micro-batch to reach them or the last to leave. More micro-batches per "
         "step make it smaller.", ("pipeline bubble",)),
    Term("Pareto", "Pareto front",
         "The layouts no other layout beats on both step time and memory: for each amount of "
         "memory, the fastest layout. Anything off the front is slower for its memory.",
         ("pareto front",)),
    Term("Recompute", "activation recomputation",
         "Throw away most activations after the forward pass and compute them again during "
         "backward: much less memory, about a third more compute.",
         ("activation checkpointing", "checkpointing")),
    Term("Offload", "offload",
         "Keep the optimizer states (or activations) in the CPU's memory or on NVMe instead "
         "of on the GPU; frees GPU memory at the cost of copies over PCIe.", ()),
)}

_BY_ALIAS = {alias.lower(): t for t in GLOSSARY.values()
             for alias in (t.name, t.long, *t.aliases)}


def term(word: str) -> Term | None:
    """The term spelled ``word`` (any case, name, full name or alias), or None."""
    return _BY_ALIAS.get(word.strip().lower())


def explain(word: str) -> str:
    """``"TP (tensor parallelism): Each layer's ..."`` or "" for a word not in the table."""
    t = term(word)
    return f"{t.name} ({t.long}): {t.meaning}" if t else ""
