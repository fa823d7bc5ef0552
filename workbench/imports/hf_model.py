"""A model's shape from a Hugging Face ``config.json``, or from its Hub id when the catalog has
that model.

Keys (transformers 5.25 ``models/<type>/configuration_<type>.py``, Llama-style decoders):
``num_hidden_layers`` -> layers, ``hidden_size`` -> hidden, ``num_attention_heads`` -> heads,
``num_key_value_heads`` -> kv_heads (the configs default it to the head count),
``intermediate_size`` -> ffn_hidden, ``vocab_size`` -> vocab, ``head_dim`` -> head_dim (when it
is not hidden / heads), ``tie_word_embeddings`` -> tied_embeddings; MoE: Mixtral's
``num_local_experts`` (Qwen-MoE's ``num_experts``), ``num_experts_per_tok``,
``moe_intermediate_size``, Qwen2-MoE's ``shared_expert_intermediate_size``.
These model types build a gated MLP (gate, up and down projections: SwiGLU, or GeGLU for
Gemma), which the workbench's ``mlp: swiglu`` counts. A ``config.json`` may carry any other key
(``PretrainedConfig.__init__`` keeps unknown kwargs as attributes: configuration_utils.py), so
keys that do not shape the model are listed in a note, not refused.

This machine cannot reach the Hub, so an id resolves only to a catalog preset, matched by the
``config.json`` each preset cites (workbench/catalog/models.py ``source``); any other id is
refused with one line asking for its ``config.json``.
"""
from __future__ import annotations

import re

from workbench.imports.common import Collector, parse_table
from workbench.imports.types import Reading

FORMAT = "hf_model"

# transformers 5.25: each type's config class default for tie_word_embeddings (held equal to
# AutoConfig.for_model(type) by tests/test_import_readers.py); other types: PretrainedConfig's True
GATED = {"llama": False, "mistral": False, "qwen2": False, "qwen3": False, "mixtral": False,
         "gemma": True, "gemma2": True, "gemma3_text": True, "qwen2_moe": False,
         "qwen3_moe": False, "phi3": False}
PRETRAINED_TIE_DEFAULT = True      # configuration_utils.py PretrainedConfig
# hidden_act values of those gated MLPs (activations.py ACT2FN names)
GATED_ACTS = ("silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new", "gelu_fast")
# Model types that are no decoder-only language model (transformers models/<type>/: encoders
# and encoder-decoders, speech and vision towers): refused by name, never read as a decoder
NOT_DECODERS = ("bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta",
                "deberta-v2", "modernbert", "t5", "mt5", "umt5", "bart", "mbart", "pegasus",
                "marian", "whisper", "wav2vec2", "hubert", "vit", "clip", "siglip", "dinov2")
# the architectures a decoder-only language model's config names (``*ForCausalLM``, GPT-2's
# ``GPT2LMHeadModel``)
DECODER_SUFFIXES = ("ForCausalLM", "LMHeadModel")
# keys that change the shape but the workbench does not model: refused with what to do
UNMODELLED = {"kv_lora_rank": "multi-head latent attention: use model.preset deepseek-v3 or "
                              "the explicit MLA fields"}
# keys read, and keys that do not change memory or time (not listed in the note)
READ = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
        "intermediate_size", "vocab_size", "head_dim", "tie_word_embeddings", "hidden_act",
        "model_type", "num_local_experts", "num_experts", "num_experts_per_tok",
        "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step",
        "mlp_only_layers", "architectures", "rms_norm_eps", "max_position_embeddings",
        "rope_theta", "rope_scaling", "rope_parameters", "torch_dtype", "dtype",
        "transformers_version", "bos_token_id", "eos_token_id", "pad_token_id", "use_cache",
        "initializer_range", "attention_dropout", "hidden_dropout", "_name_or_path",
        "router_aux_loss_coef", "output_router_logits", "norm_topk_prob", "pretraining_tp")

_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SOURCE_ID = re.compile(r"huggingface\.co/([\w.-]+/[\w.-]+) config\.json")


def looks_like(name: str, text: str) -> bool:
    """A ``config.json`` names the decoder's layer count and width."""
    return '"num_hidden_layers"' in text and '"hidden_size"' in text


def is_model_id(text: str) -> bool:
    """``org/name``, as the Hub spells a model id."""
    return bool(_ID.match(text.strip())) and not text.strip().lower().endswith(
        (".json", ".yaml", ".yml", ".toml", ".sh", ".txt", ".cfg"))


def catalog_ids() -> dict[str, str]:
    """Hub id -> catalog preset, from the config.json each preset cites."""
    from workbench.catalog import CATALOGS

    out = {}
    for key, shape in CATALOGS["model"].items():
        m = _SOURCE_ID.search(shape.source)
        if m:
            out[m.group(1)] = key
        if shape.extra.get("hf_id"):     # the published checkpoints' records name theirs
            out[shape.extra["hf_id"]] = key
    return out


def model_for_id(c: Collector, key: str, model_id: str) -> None:
    """State ``model.preset`` for a known id (any case, as the Hub matches ids), else a
    problem asking for its config.json."""
    ids = catalog_ids()
    preset = {k.lower(): v for k, v in ids.items()}.get(str(model_id).strip().lower())
    if preset is None:
        c.problem(key, model_id, "is not a model the workbench knows without the Hub (known: "
                  + ", ".join(sorted(ids)) + "); pass the model's config.json too")
        return
    c.state("model", {"preset": preset})
    c.note(f"{model_id}: the catalog's {preset}")


def read_id(name: str) -> Reading:
    """A model named by its Hub id (the command line's argument that is not a file)."""
    c = Collector(name, FORMAT)
    model_for_id(c, "model", name)
    return c.reading


def read(name: str, text: str) -> Reading:
    """The config.json's shape as a ``model`` table of explicit fields."""
    cfg = parse_table(name, text)
    c = Collector(name, FORMAT)
    mtype = str(cfg.get("model_type", ""))
    arch = cfg.get("architectures")
    named = [str(a) for a in arch] if isinstance(arch, list) else []
    if mtype.lower() in NOT_DECODERS or (named and not any(
            a.endswith(DECODER_SUFFIXES) for a in named)):
        c.problem("model_type", f"{mtype} ({', '.join(named)})" if named else mtype,
                  "is not a decoder-only language model: the workbench estimates decoder-only "
                  "transformers (Llama, Qwen, Mistral, Gemma, ...); give such a model's "
                  "config.json or a catalog preset")
        return c.reading
    for key, why in UNMODELLED.items():
        if cfg.get(key):
            c.problem(key, cfg[key], f"is not read from a config.json ({why})")
    model: dict = {"name": str(cfg.get("_name_or_path") or mtype or "config.json")[:80]}
    need = {"num_hidden_layers": "layers", "hidden_size": "hidden",
            "num_attention_heads": "heads", "intermediate_size": "ffn_hidden",
            "vocab_size": "vocab"}
    for key, field in need.items():
        if key not in cfg:
            c.problem(key, None, "is required to shape the model (a Llama-style config.json)")
            continue
        v = c.integer(key, cfg[key])
        if v is not None:
            model[field] = v
    if "heads" in model:
        kv = c.integer("num_key_value_heads", cfg.get("num_key_value_heads", model["heads"]))
        if kv is not None:
            model["kv_heads"] = kv
    if cfg.get("head_dim") is not None and "hidden" in model and "heads" in model:
        hd = c.integer("head_dim", cfg["head_dim"])
        if hd is not None and hd * model["heads"] != model["hidden"]:
            model["head_dim"] = hd
    act = str(cfg.get("hidden_act", cfg.get("hidden_activation", "silu")))
    if mtype and mtype not in GATED:
        c.note(f"model_type {mtype}: read as a Llama-style decoder with a gated MLP")
    if act not in GATED_ACTS:
        c.problem("hidden_act", act, "expected a gated MLP's activation: " +
                  ", ".join(GATED_ACTS))
    model["mlp"] = "swiglu"
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = GATED.get(mtype, PRETRAINED_TIE_DEFAULT)
        c.reading.defaulted["model.tied_embeddings"] = (
            f"transformers {mtype or 'PretrainedConfig'}: tie_word_embeddings defaults to "
            f"{str(tie).lower()}")
    else:
        tie = c.boolean("tie_word_embeddings", tie)
    model["tied_embeddings"] = bool(tie)
    _moe(c, cfg, model)
    c.state("model", model)
    rest = sorted(k for k in cfg if k not in READ and k not in UNMODELLED)
    if rest:
        c.note("config.json keys that do not shape the model, not read: " + ", ".join(rest))
    return c.reading


def _moe(c: Collector, cfg: dict, model: dict) -> None:
    experts_key = "num_local_experts" if "num_local_experts" in cfg else "num_experts"
    if not cfg.get(experts_key):
        return
    experts = c.integer(experts_key, cfg[experts_key])
    top_k = c.integer("num_experts_per_tok", cfg.get("num_experts_per_tok", 2))
    size = c.integer("moe_intermediate_size", cfg["moe_intermediate_size"]) \
        if "moe_intermediate_size" in cfg else model.get("ffn_hidden")
    if None in (experts, top_k, size):
        return
    moe = {"experts": experts, "top_k": top_k, "expert_ffn_hidden": size}
    shared = cfg.get("shared_expert_intermediate_size")
    if shared:
        shared = c.integer("shared_expert_intermediate_size", shared)
    if shared:
        # Qwen2-MoE: one shared expert of this width = that many experts of moe width
        n, rem = divmod(shared, size)
        if rem:
            c.problem("shared_expert_intermediate_size", shared,
                      f"expected a multiple of moe_intermediate_size ({size}): the workbench's "
                      "shared experts have the routed experts' width")
        else:
            moe["shared_experts"] = n
    only = cfg.get("mlp_only_layers") or []
    step = cfg.get("decoder_sparse_step", 1)
    if only or step not in (1, None):
        c.problem("mlp_only_layers" if only else "decoder_sparse_step", only or step,
                  "expected every layer to be an MoE layer (the workbench's dense_layers are "
                  "leading layers only)")
    model["moe"] = moe

