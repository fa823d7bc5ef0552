"""Megatron-LM ``pretrain_gpt.py`` arguments (a command line or a launch script) read into
scenario keys: the scripts ``workbench export --to megatron`` writes and Megatron-LM's own
``examples/`` scripts (shell variables, bash arrays, ``torchrun`` in front).

Flags, defaults and their meaning: NVIDIA/Megatron-LM ``megatron/training/arguments.py`` at
commit 000c4ac24f61159c138b0975def722c65245983c (the commit :mod:`workbench.export.megatron`
writes against), the inverse of that exporter's mapping. The launcher's ``--nproc_per_node`` /
``--nnodes`` (torchrun, ``torch.distributed.run``) give the hardware's GPUs.

The script is read without running it: ``NAME=value`` assignments are substituted
(``$NAME``, ``${NAME}``, ``${NAME:-default}``; arithmetic is not evaluated), then every
``--flag`` in the text is read, in every branch of the script; the same flag twice with two
values is a problem line.

Key families (arguments.py has several hundred flags): the layout, batch, precision, recompute,
optimizer and model-shape flags below are read; the families in :data:`NO_EFFECT` (learning
rate, initialisation, data, tokenizer, logging, checkpointing, profiling, run length) change
neither memory nor step time and are listed as ignored in the notes; any other flag is a
problem line.
"""
from __future__ import annotations

import re
import shlex

from workbench.errors import Problem, shown
from workbench.imports.common import decimal_count
from workbench.imports.torchtitan import put
from workbench.imports.types import Reading
from workbench.documents.text import MAX_BYTES, MAX_DIGITS, DocumentError

FORMAT = "megatron"

# flag -> (scenario path, type); store_true flags have type bool
VALUED = {
    "--tensor-model-parallel-size": ("parallel.tp", int),
    "--pipeline-model-parallel-size": ("parallel.pp", int),
    "--context-parallel-size": ("parallel.cp", int),
    "--expert-model-parallel-size": ("parallel.ep", int),
    "--expert-tensor-parallel-size": ("parallel.expert_tp", int),
    "--num-virtual-stages-per-pipeline-rank": ("parallel.virtual_stages", int),
    "--micro-batch-size": ("training.micro_batch", int),
    "--global-batch-size": ("training.global_batch", int),
    "--seq-length": ("training.seq_len", int),
    "--num-layers": ("model.layers", int),
    "--hidden-size": ("model.hidden", int),
    "--ffn-hidden-size": ("model.ffn_hidden", int),
    "--num-attention-heads": ("model.heads", int),
    "--num-query-groups": ("model.kv_heads", int),
    "--kv-channels": ("model.head_dim", int),
    "--num-experts": ("model.moe.experts", int),
    "--moe-router-topk": ("model.moe.top_k", int),
    "--moe-ffn-hidden-size": ("model.moe.expert_ffn_hidden", int),
    "--moe-expert-capacity-factor": ("model.moe.capacity_factor", float),
}
# flags read below, with a value (str) or without (bool)
OTHER = {"--sequence-parallel": bool, "--tp-comm-overlap": bool,
         "--overlap-grad-reduce": bool, "--overlap-param-gather": bool,
         "--use-distributed-optimizer": bool, "--use-megatron-fsdp": bool,
         "--data-parallel-sharding-strategy": str, "--num-distributed-optimizer-instances": int,
         "--pipeline-model-parallel-layout": str, "--num-layers-per-virtual-pipeline-stage": int,
         "--bf16": bool, "--fp16": bool, "--fp8-format": str, "--fp8-recipe": str,
         "--fp8-param-gather": bool, "--fp8-dot-product-attention": bool,
         "--fp4-format": str, "--fp4-recipe": str,
         "--recompute-granularity": str, "--recompute-method": str,
         "--recompute-num-layers": int, "--recompute-modules": str,
         "--optimizer": str, "--optimizer-cpu-offload": bool,
         "--attention-backend": str, "--swiglu": bool, "--normalization": str,
         "--untie-embeddings-and-output-weights": bool, "--disable-bias-linear": bool,
         "--group-query-attention": bool, "--vocab-size": int, "--tokenizer-type": str,
         "--moe-shared-expert-intermediate-size": int, "--train-samples": int,
         "--train-iters": int,
         "--grad-reduce-in-bf16": bool, "--use-precision-aware-optimizer": bool,
         "--main-grads-dtype": str, "--main-params-dtype": str, "--exp-avg-dtype": str,
         "--exp-avg-sq-dtype": str,
         # torchrun's own (torch.distributed.run), both spellings
         "--nproc_per_node": str, "--nproc-per-node": str, "--nnodes": str}
# flag families that change neither memory nor step time (prefix match)
NO_EFFECT = ("--lr", "--min-lr", "--decoupled-", "--weight-decay", "--clip-grad", "--adam-",
             "--sgd-", "--init-method", "--seed", "--log", "--eval", "--save", "--load",
             "--tensorboard", "--wandb", "--data-", "--split", "--mock-data", "--tokenizer-model",
             "--vocab-file", "--merge-file", "--tiktoken", "--num-workers", "--no-mmap",
             "--no-create-attention-mask", "--profile", "--exit-", "--distributed-timeout",
             "--ckpt-", "--use-mcore-models", "--manual-gc", "--empty-unused-memory",
             "--calculate-per-token-loss", "--rotary-", "--position-embedding-type",
             "--max-position-embeddings", "--attention-dropout", "--hidden-dropout",
             "--apply-layernorm-1p", "--make-vocab-size-divisible-by", "--cp-comm-type",
             "--moe-token-dispatcher-type", "--moe-router-", "--moe-aux-loss", "--moe-layer-freq",
             "--no-gradient-accumulation",
             "--cross-entropy-loss-fusion",
             "--fp8-amax", "--fp8-margin", "--transformer-impl",
             "--node_rank", "--node-rank", "--master_addr", "--master-addr", "--master_port",
             "--master-port", "--rdzv", "--max-restarts",
             "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-", "--v-head-dim",
             "--lr-", "--use-flash-attn", "--bias-", "--masked-softmax-fusion",
             "--no-bias-", "--no-masked-softmax-fusion", "--no-position-embedding",
             "--use-rotary-position-embeddings")
# --fp8-recipe -> training.fp8_recipe (blockwise: the export's spelling of rowwise)
FP8 = {"tensorwise": "tensorwise", "delayed": "delayed", "mxfp8": "mxfp8",
       "blockwise": "rowwise"}
ATTENTION = {"flash": "flash2", "fused": "cudnn", "unfused": "eager"}
SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
# A variable's value longer than this once expanded is not a launch setting (a path, a number,
# a flag list is far shorter): it is left unexpanded, so a script whose assignments each double
# the last (A1="$A0$A0", ... 2^k bytes) costs no more than its own text to read.
MAX_VALUE = 4096
_VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?::?-([^}]*))?\}|\$([A-Za-z_]\w*)")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(.*)$")


def looks_like(name: str, text: str) -> bool:
    """Text naming ``pretrain_gpt.py`` or Megatron's layout flags."""
    return "pretrain_gpt" in text or "--tensor-model-parallel-size" in text


class _TooLong(Exception):
    """The script's text with its variables substituted is past ``MAX_BYTES``."""


def _expand(text: str, env: dict[str, str], limit: int = MAX_BYTES) -> str:
    """``text`` with ``$NAME`` / ``${NAME}`` / ``${NAME:-default}`` substituted; _TooLong as
    soon as the result would pass ``limit`` characters (many uses of a long variable)."""
    grown = [len(text)]

    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            out = env[name]
        else:
            out = m.group(2) if m.group(2) is not None else m.group(0)
        grown[0] += len(out) - len(m.group(0))
        if grown[0] > limit:
            raise _TooLong
        return out
    return _VAR.sub(sub, text)


def _variables(text: str) -> dict[str, str]:
    """Shell assignments, in order, each expanded with the ones before it."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        m = _ASSIGN.match(line)
        if not m or m.group(2).startswith("("):   # arrays are read as flags
            continue
        try:
            words = shlex.split(_expand(m.group(2), env, MAX_VALUE), comments=True)
        except (ValueError, _TooLong):     # unbalanced quotes; a value past MAX_VALUE
            continue
        if len(words) == 1:
            env[m.group(1)] = words[0]
    return env


# Flags whose value is a list of words (argparse nargs="*"): read whole, space-separated.
LISTS = ("--recompute-modules",)


def flags(text: str) -> list[tuple[str, str | None]]:
    """``(flag, value)`` for every ``--flag`` of the script, variables substituted; value None
    for a flag followed by another flag or the end of a group; a ``LISTS`` flag's value is
    every word up to the next flag."""
    text = text.replace("\\\n", " ")
    body = _expand(text, _variables(text))
    words: list[str] = []
    for line in body.splitlines():
        try:
            lex = shlex.shlex(line, posix=True, punctuation_chars="();&|")
            lex.whitespace_split = True
            lex.commenters = "#"
            found = list(lex)
        except ValueError:
            found = line.split()
        for w in found:
            # bash array elements quoted whole ("--fp8-format hybrid") hold a flag and its value
            words += w.split() if w.startswith("--") else [w]
        words.append("\n")
    out: list[tuple[str, str | None]] = []
    for i, w in enumerate(words):
        if not w.startswith("--"):
            continue
        flag, _, inline = w.partition("=")
        nxt = words[i + 1] if i + 1 < len(words) else None
        value = inline or (nxt if nxt and not nxt.startswith("--") and nxt != "\n"
                           and not set(nxt) <= set("();&|") else None)
        if flag in LISTS and value is not None and not inline:
            items = []
            for word in words[i + 1:]:
                if word.startswith("--") or word == "\n" or set(word) <= set("();&|"):
                    break
                items.append(word)
            value = " ".join(items)
        out.append((flag, value))
    return out


def read(name: str, text: str) -> Reading:
    """The script read into a :class:`Reading`."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise DocumentError(name, f"more than {MAX_BYTES} bytes")
    r = Reading(source=name, format=FORMAT)
    given: dict[str, str | None] = {}
    ignored: set[str] = set()
    try:
        found = flags(text)
    except _TooLong:
        raise DocumentError(name, f"its shell variables expand past {MAX_BYTES:,} bytes") \
            from None
    for flag, value in found:
        if flag in VALUED or flag in OTHER:
            kind = VALUED[flag][1] if flag in VALUED else OTHER[flag]
            val = None if kind is bool else value
            if flag in given and given[flag] != val:
                if flag in VALUED:   # a degree, batch or shape: which one runs is the user's
                    r.problems.append(Problem(f"{name}:{flag}", val, f"given twice, also as "
                                              f"{shown(given[flag])}; expected one value"))
                    continue
                # a script's branches (mock data or a real tokenizer, ...) set a secondary
                # flag twice: argparse keeps the last occurrence, and so does the reader
                r.notes.append(f"{flag} given twice ({shown(given[flag])}, then "
                               f"{shown(val)}): read as the last, as argparse does")
            if kind is not bool and val is None:
                r.problems.append(Problem(f"{name}:{flag}", None, "expects a value"))
                continue
            given[flag] = val
        elif flag.startswith(NO_EFFECT):
            ignored.add(flag)
        else:
            r.problems.append(Problem(f"{name}:{flag}", value, "not a Megatron-LM flag the "
                                      "workbench reads (layout, batch, precision, recompute, "
                                      "optimizer, model shape)"))
    if ignored:
        r.notes.append("ignored (no effect on memory or step time): "
                       + " ".join(sorted(ignored)))
    # a Megatron-LM launch runs on Megatron-LM (the engine record of Megatron-Core)
    r.document.setdefault("training", {})["engine"] = "megatron"
    _apply(r, given)
    return r


def _number(r: Reading, flag: str, value: str | None, kind=int):
    try:
        out = kind(value)
        if kind is int and abs(out) >= 10 ** MAX_DIGITS:   # the scenario reader's bound
            raise ValueError(value)
        return out
    except (TypeError, ValueError, OverflowError):
        r.problems.append(Problem(f"{r.source}:{flag}", value, f"expected a{'n integer' if kind is int else ' number'}"))
        return None


def _apply(r: Reading, g: dict[str, str | None]) -> None:
    doc = r.document
    for flag, (path, kind) in VALUED.items():
        if flag in g:
            v = _number(r, flag, g[flag], kind)
            if v is not None:
                put(doc, path, v)
    par, tr, model = doc.get("parallel", {}), doc.get("training", {}), doc.get("model", {})
    tp, pp, cp = par.get("tp", 1), par.get("pp", 1), par.get("cp", 1)
    for flag, path in (("--tensor-model-parallel-size", "parallel.tp"),
                       ("--pipeline-model-parallel-size", "parallel.pp"),
                       ("--context-parallel-size", "parallel.cp")):
        if flag not in g:   # arguments.py: each defaults to 1
            put(doc, path, 1)
            r.defaulted[path] = f"Megatron-LM's {flag} defaults to 1"
    # hardware from torchrun (numbers only; a $VAR left unexpanded is not read)
    per_node = decimal_count(g.get("--nproc_per_node", g.get("--nproc-per-node")))
    nodes = decimal_count(g.get("--nnodes"))
    if per_node:
        put(doc, "hardware.gpus_per_node", per_node)
        if nodes is not None:
            put(doc, "hardware.nodes", nodes)
        world = per_node * (nodes if nodes is not None else 1)
        model_par = tp * pp * cp
        # a degree below 1 is the validator's to name (parallel.tp ...), never a divisor
        if all(isinstance(d, int) and d >= 1 for d in (tp, pp, cp)) and world % model_par == 0:
            put(doc, "parallel.dp", world // model_par)
    # the run's length: --train-iters optimizer steps of the global batch, or --train-samples
    # sequences (Megatron-LM arguments.py: one of the two ends training)
    seq = tr.get("seq_len")
    if "--train-samples" in g:
        samples = _number(r, "--train-samples", g["--train-samples"])
        if samples and isinstance(seq, int) and seq > 0:
            put(doc, "training.tokens", float(samples * seq))
    elif "--train-iters" in g:
        iters = _number(r, "--train-iters", g["--train-iters"])
        if iters:
            # tokens = steps x global batch x seq_len, once the merge knows the batch
            put(doc, "training.steps", iters)
    # sequence parallelism: off unless given (arguments.py store_true)
    put(doc, "parallel.sequence_parallel", "--sequence-parallel" in g)
    if "--tp-comm-overlap" in g:
        put(doc, "parallel.tp_comm_overlap", True)
    # DP overlap: off unless given (arguments.py store_true; the engine record's default is the
    # published recipes' on, so a command line without the flag states off)
    put(doc, "parallel.overlap_grad_reduce", "--overlap-grad-reduce" in g)
    put(doc, "parallel.overlap_param_gather", "--overlap-param-gather" in g)
    # ZeRO: distributed optimizer = ZeRO-1; Megatron-FSDP's sharding strategy
    zero = 1 if "--use-distributed-optimizer" in g else 0
    if "--use-megatron-fsdp" in g:
        strategy = g.get("--data-parallel-sharding-strategy", "optim_grads_params")
        if strategy not in SHARDING:
            r.problems.append(Problem(f"{r.source}:--data-parallel-sharding-strategy", strategy,
                                      "expected " + ", ".join(SHARDING)))
        else:
            zero = SHARDING[strategy]
    put(doc, "parallel.zero", zero)
    inst = g.get("--num-distributed-optimizer-instances")
    if inst and "dp" in doc.get("parallel", {}):
        k = _number(r, "--num-distributed-optimizer-instances", inst)
        dpcp = doc["parallel"]["dp"] * cp
        if k and k > 1 and dpcp % k == 0:
            put(doc, "parallel.shard_group", dpcp // k)
    # pipeline schedule: Megatron runs 1F1B, interleaved with virtual stages
    if pp > 1:
        v = par.get("virtual_stages", 1)
        if "--num-layers-per-virtual-pipeline-stage" in g and "layers" in model:
            per = _number(r, "--num-layers-per-virtual-pipeline-stage",
                          g["--num-layers-per-virtual-pipeline-stage"])
            if per:
                v = model["layers"] // (pp * per)
        if g.get("--pipeline-model-parallel-layout"):
            v = max(1, (g["--pipeline-model-parallel-layout"].count("|") + 1) // pp)
        put(doc, "parallel.virtual_stages", v)
        put(doc, "parallel.pp_schedule", "interleaved-1f1b" if v > 1 else "1f1b")
    # precision
    if "--fp8-format" in g:
        put(doc, "training.precision", "fp8")
        for flag, key in (("--fp8-param-gather", "fp8_param_gather"),
                          ("--fp8-dot-product-attention", "fp8_attention")):
            if flag in g:     # Megatron's store_true switches (arguments.py)
                put(doc, f"training.{key}", True)
        recipe = g.get("--fp8-recipe")
        if recipe is not None:
            if recipe in FP8:
                put(doc, "training.fp8_recipe", FP8[recipe])
            else:
                r.problems.append(Problem(f"{r.source}:--fp8-recipe", recipe,
                                          "expected " + ", ".join(FP8)))
    elif "--fp4-format" in g:
        # --fp4-format e2m1 (the only choice) with --fp4-recipe nvfp4 (the default) or custom
        # (a user quantizer factory: nothing the estimate can cost) — megatron-core 0.16
        # megatron/core/transformer/transformer_config.py:510-518
        recipe = g.get("--fp4-recipe") or "nvfp4"
        if g["--fp4-format"] != "e2m1":
            r.problems.append(Problem(f"{r.source}:--fp4-format", g["--fp4-format"],
                                      "expected e2m1"))
        elif recipe != "nvfp4":
            r.problems.append(Problem(f"{r.source}:--fp4-recipe", recipe,
                                      "expected nvfp4 (custom quantizers are not costed)"))
        else:
            put(doc, "training.precision", "nvfp4")
    elif "--bf16" in g and "--fp16" in g:
        r.problems.append(Problem(f"{r.source}:--bf16", None, "given with --fp16; expected "
                                  "one precision"))
    else:
        prec = "bf16" if "--bf16" in g else "fp16" if "--fp16" in g else "fp32"
        put(doc, "training.precision", prec)
        if prec == "fp32":
            r.defaulted["training.precision"] = "Megatron-LM trains in fp32 without --bf16/--fp16"
    _recompute(r, g, model.get("layers"), pp * doc.get("parallel", {}).get("virtual_stages", 1))
    opt = g.get("--optimizer", "adam")
    if "--optimizer" not in g:
        r.defaulted["training.optimizer"] = "Megatron-LM's --optimizer defaults to adam (AdamW)"
    if opt in ("adam", "sgd"):
        put(doc, "training.optimizer", "adamw" if opt == "adam" else "sgd")
    else:
        r.problems.append(Problem(f"{r.source}:--optimizer", opt, "expected adam or sgd"))
    _state_dtypes(r, g, doc)
    if "--optimizer-cpu-offload" in g:
        put(doc, "training.offload", "cpu")
    att = g.get("--attention-backend")
    if att in ATTENTION:
        put(doc, "training.attention", ATTENTION[att])
    _model(r, g)


# Megatron-Core's recompute modules (transformer_config.py recompute_modules, default
# ["core_attn"]: Korthikanti's selective recompute, the workbench's "selective")
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                     "shared_experts")


def _recompute(r: Reading, g: dict, layers: int | None, stages: int) -> None:
    gran = g.get("--recompute-granularity")
    modules = (g.get("--recompute-modules") or "").split()
    unknown = [m for m in modules if m not in RECOMPUTE_MODULES]
    if unknown:
        r.problems.append(Problem(f"{r.source}:--recompute-modules", " ".join(unknown),
                                  "expected " + ", ".join(RECOMPUTE_MODULES)))
        return
    if modules and gran == "selective":
        put(r.document, "training.recompute_modules", modules)
    elif modules and gran != "selective":
        # transformer_config.py: every module recompute is gated on granularity 'selective'
        r.notes.append(f"--recompute-modules {' '.join(modules)}: no effect without "
                       "--recompute-granularity selective (Megatron-Core recomputes modules "
                       "only under selective granularity)")
    if gran is None:
        put(r.document, "training.recompute", "none")
    elif gran == "selective":
        put(r.document, "training.recompute", "selective")
    elif gran == "full":
        method = g.get("--recompute-method", "uniform")
        n = _number(r, "--recompute-num-layers", g.get("--recompute-num-layers", "1"))
        if method == "uniform" and n == 1:
            put(r.document, "training.recompute", "full")
        elif method == "block" and n and layers:
            # the first n layers of each stage whole (the exporter's layer policy)
            put(r.document, "training.recompute", "layer")
            # (stages below 1, from a virtual-stage count of 0, is the validator's to name)
            per_stage = layers // stages if stages >= 1 else layers
            put(r.document, "training.recompute_every", max(1, per_stage // n))
        else:
            r.problems.append(Problem(f"{r.source}:--recompute-method", method,
                                      "expected uniform with 1 layer, or block"))
    else:
        r.problems.append(Problem(f"{r.source}:--recompute-granularity", gran,
                                  "expected full or selective"))


def _model(r: Reading, g: dict) -> None:
    m = r.document.get("model")
    if not m:
        return
    if "heads" in m and "kv_heads" not in m:
        m["kv_heads"] = m["heads"]   # no --group-query-attention: one KV head per head
    m["mlp"] = "swiglu" if "--swiglu" in g else "gelu"
    if "--normalization" in g:
        m["norm"] = "rmsnorm" if g["--normalization"] == "RMSNorm" else "layernorm"
    m["tied_embeddings"] = "--untie-embeddings-and-output-weights" not in g
    m["bias"] = "--disable-bias-linear" not in g
    if "--vocab-size" in g:
        v = _number(r, "--vocab-size", g["--vocab-size"])
        if v:
            # NullTokenizer adds an end-of-document id (megatron/training/tokenizer)
            m["vocab"] = v + 1 if g.get("--tokenizer-type") == "NullTokenizer" else v
    shared = g.get("--moe-shared-expert-intermediate-size")
    if shared and m.get("moe", {}).get("expert_ffn_hidden"):
        n = _number(r, "--moe-shared-expert-intermediate-size", shared)
        if n:
            m["moe"]["shared_experts"] = n // m["moe"]["expert_ffn_hidden"]


def _state_dtypes(r: Reading, g: dict, doc: dict) -> None:
    """``training.state_dtypes`` from Megatron-LM's mixed-precision and precision-aware-optimizer
    flags (engines/megatron.py cites them): --grad-reduce-in-bf16, or --main-grads-dtype bf16
    under the precision-aware optimizer (which then leaves the fp32 accumulation off,
    arguments.py:1209-1216), keeps bf16 gradients; under --use-precision-aware-optimizer the
    master is --main-params-dtype (fp32 kept as 16-bit remainders beside bf16 weights, where no
    FP8 recipe but delayed scaling keeps its own) and the moments --exp-avg-dtype /
    --exp-avg-sq-dtype. Without it Megatron-Core asserts every one of them fp32."""
    pao = "--use-precision-aware-optimizer" in g
    dtypes = {k: g.get(f"--{k}-dtype") or "fp32"
              for k in ("main-grads", "main-params", "exp-avg", "exp-avg-sq")}
    for key, value in dtypes.items():
        if value != "fp32" and not pao:
            r.problems.append(Problem(f"{r.source}:--{key}-dtype", value, "only with "
                                      "--use-precision-aware-optimizer (Megatron-Core asserts "
                                      "fp32 without it)"))
            return
    sd = {}
    if "--grad-reduce-in-bf16" in g or dtypes["main-grads"] == "bf16":
        sd["grads"] = "bf16"
    if pao:
        prec = doc.get("training", {}).get("precision")
        recipe = doc.get("training", {}).get("fp8_recipe", "delayed")
        if dtypes["main-params"] == "fp16":
            sd["master"] = "fp16"
        elif prec == "bf16" or (prec == "fp8" and recipe == "delayed"):
            sd["master"] = "remainder"     # OptimizerConfig.store_param_remainders, default True
        if dtypes["exp-avg"] != dtypes["exp-avg-sq"]:
            r.problems.append(Problem(f"{r.source}:--exp-avg-sq-dtype", dtypes["exp-avg-sq"],
                                      f"the workbench keeps both moments in one dtype "
                                      f"(--exp-avg-dtype is {dtypes['exp-avg']})"))
            return
        if dtypes["exp-avg"] in ("bf16", "fp16"):
            sd["moments"] = dtypes["exp-avg"]
        elif dtypes["exp-avg"] != "fp32":
            r.problems.append(Problem(f"{r.source}:--exp-avg-dtype", dtypes["exp-avg"],
                                      "expected fp32, bf16 or fp16 (FP8 moments are not "
                                      "costed)"))
            return
    if sd:
        for key, value in sd.items():
            put(doc, f"training.state_dtypes.{key}", value)
