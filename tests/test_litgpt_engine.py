"""The ``litgpt`` engine record: LitGPT's own modules, Fabric's fp32 output, bitsandbytes 0.41's
MatMul4Bit and FSDP1's flat parameters, each a mechanism (workbench/engines/litgpt.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.estimate.memory import activations as act
from workbench.estimate.memory.buffers import loss_per_logit
from workbench.estimate.model.finetune import NF4_BYTES
from workbench.scenario import parse_scenario
from workbench.units import GiB

ROOT = Path(__file__).resolve().parent.parent
LLAMA2_7B = {"name": "Llama 2 7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32,
             "ffn_hidden": 11008, "vocab": 32000, "mlp": "swiglu", "norm": "rmsnorm",
             "tied_embeddings": False, "bias": False}


def doc(method: str = "lora", gpus: int = 1, micro_batch: int = 1, global_batch: int = 128,
        engine: str = "litgpt", **training) -> dict:
    return {"model": dict(LLAMA2_7B),
            "hardware": {"gpu": "a100-sxm-40gb", "gpus_per_node": gpus, "nodes": 1},
            "parallel": {"dp": gpus, "zero": 3 if gpus > 1 else 0},
            "training": {"method": method, "optimizer": "adamw", "seq_len": 1304,
                         "lora": {"rank": 8, "alpha": 16, "targets": ["q", "v"],
                                  "dropout": 0.05},
                         "micro_batch": micro_batch, "global_batch": global_batch,
                         "precision": "bf16", "engine": engine,
                         "recompute": "full" if gpus > 1 else "none", **training}}


def problems(d: dict) -> list[str]:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(d)
    return [f"{p.path}: {p.message}" for p in err.value.problems]


def per_token_layer(method: str) -> dict[str, float]:
    s = parse_scenario(doc(method))
    x = act.activation_shape(s.training, s.parallel, pytorch_eager=True)
    return {k: v / 1304 for k, v in act.layer_terms(s.model, x, False).items()}


def test_a_lora_block_keeps_what_litgpts_autograd_graph_keeps():
    # Counted by hand from LitGPT 8641822's modules (engines/litgpt.py): two bf16 RMSNorms
    # keeping x and x*x (8C), one dropout on the fused qkv input (3C), zero_pad's source of
    # q and v (4C), the whole qkv beside the roped q and k (10C), the SDPA output (2C),
    # SwiGLU's silu input, output and up (6I): 27C + 6I bytes per token, plus small statistics
    C, I = 4096, 11008
    t = per_token_layer("lora")
    assert t["attn.norm_input"] == t["mlp.norm_input"] == 4 * C
    assert t["attn.lora_dropout"] == 3 * C and t["attn.lora_zero_pad"] == 4 * C
    assert t["attn.qkv_fused"] == 4 * C and "attn.qkv_input" not in t
    assert "mlp.fc1_input" not in t and "mlp.fc2_input" not in t
    assert sum(t.values()) == pytest.approx(27 * C + 6 * I, rel=0.002)


def test_qlora_keeps_every_quantized_linears_input():
    # bitsandbytes 0.41's MatMul4Bit keeps its input A whatever the weight: the qkv input
    # (the norm's output), the MLP's input and the down projection's input, 4C + 2I more
    C, I = 4096, 11008
    lora, qlora = per_token_layer("lora"), per_token_layer("qlora")
    assert sum(qlora.values()) - sum(lora.values()) == pytest.approx(4 * C + 2 * I)
    # the generic record keeps PEFT's later bitsandbytes, which saves (None, B)
    s = parse_scenario(doc("qlora", engine="generic"))
    x = act.activation_shape(s.training, s.parallel)
    assert "mlp.fc2_input" not in act.layer_terms(s.model, x, False)


def test_fabrics_fp32_output_is_the_logits_kept_into_the_backward():
    assert loss_per_logit("chunked", 2, True, output_fp32=True) == (6.0, 4.0 + 1.0)
    assert loss_per_logit("chunked", 2, True) == (2.5, 2.0 + 1.0)


def test_the_quantized_head_is_stored_in_nf4_and_dequantized_into_fp16_and_bf16():
    lit = estimate(parse_scenario(doc("qlora"))).memory
    gen = estimate(parse_scenario(doc("qlora", engine="generic"))).memory
    head = 32000 * 4096
    # fp16 output + its bf16 cast
    assert lit.per_stage[0].buffers["dequantized_weight"] == head * 4
    assert gen.per_stage[0].buffers["dequantized_weight"] == 11008 * 4096 * 2
    # the head's 16-bit weight replaced by NF4 (double quantized by default)
    nf4 = NF4_BYTES[parse_scenario(doc("qlora")).training.lora.double_quant]
    assert gen.per_gpu.params - lit.per_gpu.params == pytest.approx(head * (2 - nf4))


def test_fsdp1_keeps_the_frozen_weights_unsharded_gradients_through_accumulation():
    per_block = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096   # linears and two norms
    acc = estimate(parse_scenario(doc(gpus=2))).memory.per_stage[0].buffers
    assert acc["flat_param_frozen_grads"] == pytest.approx(32 * per_block * 2)
    assert acc["flat_param_unit_grad"] == pytest.approx(per_block * 2)
    root = 2 * 32000 * 4096 + 4096
    assert acc["fsdp_root_unsharded"] == pytest.approx(root * 2 / 2)
    # one microbatch per step: no no_sync, the reduce-scatter leaves each rank its half
    one = estimate(parse_scenario(doc(gpus=2, global_batch=2))).memory.per_stage[0].buffers
    assert one["flat_param_frozen_grads"] == pytest.approx(32 * per_block * 2 / 2)
    # FSDP2 (torchtune's fully_shard per parameter) gives frozen weights no gradient
    fsdp2 = estimate(parse_scenario(doc(gpus=2, engine="torchtune"))).memory.per_stage[0].buffers
    assert "flat_param_frozen_grads" not in fsdp2


def test_litgpt_refuses_what_its_scripts_cannot_run():
    d = doc(gpus=2)
    d["parallel"]["zero"] = 1
    assert any(m.startswith("parallel.zero") and "FSDPStrategy" in m for m in problems(d))
    d = doc(gpus=2)
    d["parallel"].update(dp=1, tp=2)
    assert any("tensor parallelism" in m for m in problems(d))
    d = doc("pretrain")
    del d["training"]["lora"]
    assert any("pre-training" in m for m in problems(d))


def _published() -> list[dict]:
    recs = yaml.safe_load((ROOT / "benchmarks/data/published_finetune.yaml").read_text())
    return [r for r in recs if r["id"].startswith("litgpt-resource")]


@pytest.mark.parametrize("rec", _published(), ids=lambda r: r["id"])
def test_litgpts_resource_tables_within_the_mechanisms_reach(rec):
    """Single-GPU rows within 3 %; FSDP rows within 9 % (their peak falls in a later
    micro-step, whose random batch is shorter than the recorded longest sample: an upper
    bound that grows with the micro-batch)."""
    s = parse_scenario({k: rec[k] for k in ("model", "hardware", "parallel", "training")})
    est = estimate(s).memory.per_gpu.total / GiB
    error = est / rec["measured"]["peak_memory_gib"] - 1
    assert rec["training"]["engine"] == "litgpt"
    if s.parallel.dp == 1:
        assert abs(error) < 0.03, error
    else:
        assert -0.03 < error < 0.09, error
