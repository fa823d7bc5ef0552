"""Fine-tuning methods on the plain trial model, before it is parallelized: LoRA adapters with
the PEFT library itself (``peft.LoraConfig`` + ``peft.inject_adapter_in_model``), QLoRA's
quantized frozen base with bitsandbytes (``Linear4bit`` NF4 / ``Linear8bitLt`` int8), the
frozen base, and the optimizer the scenario names over the trainable parameters only.

The scenario names projections q, k, v, o, gate, up, down; the trial model (``model.py``) calls
them ``attention.wq/wk/wv/wo`` and ``feed_forward.w1/w3/w2`` (SwiGLU: w2(silu(w1 x) * w3 x), so
gate = w1, up = w3, down = w2; GELU: w2(gelu(w1 x)), so up = w1, down = w2). PEFT wraps each
target in a ``lora.Linear`` whose parameters are, in order, the base layer's weight (and bias),
``lora_A.default.weight`` (r x in) and ``lora_B.default.weight`` (out x r): the order
``workbench.trial.prediction.parameter_shapes`` predicts.
"""
from __future__ import annotations

import torch
from torch import nn

from workbench.scenario.types import Training

ATTENTION = {"q": "wq", "k": "wk", "v": "wv", "o": "wo"}
MLP_SWIGLU = {"gate": "w1", "up": "w3", "down": "w2"}
MLP_GELU = {"up": "w1", "down": "w2"}


def module_names(targets: tuple[str, ...], mlp: str) -> list[str]:
    """The trial model's module paths (relative to a block) for the scenario's projections."""
    ffn = MLP_SWIGLU if mlp == "swiglu" else MLP_GELU
    out = []
    for t in targets:
        if t in ATTENTION:
            out.append(f"attention.{ATTENTION[t]}")
        elif t in ffn:
            out.append(f"feed_forward.{ffn[t]}")
    return out


def target_regex(targets: tuple[str, ...], mlp: str) -> str:
    """PEFT's ``target_modules`` as a full-match regex over the blocks' projections only (an MoE
    layer's experts, also called w1/w2/w3, are not matched: ``layers.<i>.feed_forward.wN``)."""
    names = [n.replace(".", r"\.") for n in module_names(targets, mlp)]
    return r"layers\.\d+\.(" + "|".join(names) + ")"


def apply_method(model: nn.Module, tr: Training, seed: int) -> nn.Module:
    """Apply ``tr.method`` to the (whole, unparallelized) trial model in place and return it:
    pretrain / full leave every weight trainable; lora / qlora freeze the base (qlora
    quantizes every block projection first), inject LoRA adapters on the targets
    (lora_dropout 0, PEFT's initialisation: A Kaiming-uniform, B zeros, drawn from ``seed`` so
    every rank and the single-process reference draw the same) and train the parts named in
    ``lora.trainable`` (embeddings, norms, head) in full."""
    if not tr.adapters:
        return model
    import peft

    lora = tr.lora
    if tr.method == "qlora":
        quantize_base(model, lora.quant, lora.double_quant)
    config = peft.LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=0.0,
                             target_modules=target_regex(lora.targets, model.shape.mlp),
                             bias="none")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        peft.inject_adapter_in_model(config, model)
    for p in model.parameters():            # PEFT froze all but the adapters; make sure
        p.requires_grad_(False)
    for name, p in model.named_parameters():
        if ".lora_A." in name or ".lora_B." in name:
            p.requires_grad_(True)
    for part in lora.trainable:
        for p in trainable_part(model, part):
            p.requires_grad_(True)
    return model


def trainable_part(model: nn.Module, part: str) -> list[nn.Parameter]:
    """The parameters of ``part`` (embeddings, norms, head) trained in full beside adapters."""
    from workbench.trial.model import Norm

    if part == "embeddings":
        emb = getattr(model, "embeddings", None)
        return list(emb.parameters()) if emb is not None else []
    if part == "norms":
        return [p for m in model.modules() if isinstance(m, Norm) for p in m.parameters()]
    if part == "head":
        out = getattr(model, "output", None)
        return list(out.parameters()) if out is not None else []
    raise ValueError(part)


def quantize_base(model: nn.Module, quant: str, double_quant: bool) -> None:
    """QLoRA's frozen base: every block projection replaced by bitsandbytes' ``Linear4bit``
    (NF4, blocks of 64, ``compress_statistics`` = double quantization) or ``Linear8bitLt``
    (LLM.int8 without fp16 weights), computing in fp32 (the trial's precision). Embeddings,
    norms and the head stay in full precision, as ``BitsAndBytesConfig(load_in_4bit=True)``
    leaves ``lm_head``."""
    import bitsandbytes as bnb

    for layer in model.layers.values():
        for parent in (layer.attention, layer.feed_forward):
            for name, child in list(parent.named_children()):
                if type(child) is not nn.Linear:
                    continue
                bias = child.bias is not None
                if quant == "nf4":
                    q = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=bias,
                                          compute_dtype=torch.float32, quant_type="nf4",
                                          compress_statistics=double_quant)
                    q.weight = bnb.nn.Params4bit(child.weight.data.clone(), requires_grad=False,
                                                 quant_type="nf4",
                                                 compress_statistics=double_quant)
                else:
                    q = bnb.nn.Linear8bitLt(child.in_features, child.out_features, bias=bias,
                                            has_fp16_weights=False, threshold=0.0)
                    q.weight = bnb.nn.Int8Params(child.weight.data.clone(), requires_grad=False,
                                                 has_fp16_weights=False)
                if bias:
                    q.bias = nn.Parameter(child.bias.data.clone(), requires_grad=False)
                setattr(parent, name, q.to(child.weight.device))


def quant_state_bytes(model: nn.Module) -> int:
    """Bytes of the quantized base's constants that are not parameters: NF4's absmax (and,
    double-quantized, its own absmax, code and offset), int8's per-row scales (SCB)."""
    total, seen = 0, set()

    def add(t) -> None:
        nonlocal total
        if isinstance(t, torch.Tensor) and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()

    for p in model.parameters():
        qs = getattr(p, "quant_state", None)
        if qs is not None:
            add(qs.absmax)
            add(qs.code)
            if qs.nested:
                add(qs.state2.absmax)
                add(qs.state2.code)
                add(qs.offset)
        add(getattr(p, "SCB", None))
    return total


# -- the optimizer the scenario names ------------------------------------------------------

LR = {"sgd": 1e-2}


def optimizer_class(name: str, device_type: str = "cpu"):
    """(optimizer class, keyword arguments) for the scenario's optimizer name."""
    if name == "adamw":
        kwargs = {"lr": 1e-3}
        if device_type == "cuda":
            # torchtitan's default optimizer.implementation = "fused" (CUDA only; pytorch/
            # torchtitan torchtitan/config/job_config.py class Optimizer)
            kwargs["fused"] = True
        return torch.optim.AdamW, kwargs
    if name == "sgd":
        return torch.optim.SGD, {"lr": 1e-2, "momentum": 0.9}
    if name in ("adamw8bit", "paged_adamw8bit"):
        import bitsandbytes as bnb

        cls = bnb.optim.AdamW8bit if name == "adamw8bit" else bnb.optim.PagedAdamW8bit
        return cls, {"lr": 1e-3}
    if name == "adamw4bit":
        from torchao.optim import AdamW4bit

        return AdamW4bit, {"lr": 1e-3}
    if name == "adafactor":
        return torch.optim.Adafactor, {"lr": 1e-2}
    raise ValueError(f"unknown optimizer {name}")


def trainable_numel(params) -> int:
    return sum(p.numel() for p in params if p.requires_grad)
