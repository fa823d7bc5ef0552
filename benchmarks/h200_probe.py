"""The estimate against a real H200 training Hugging Face's Llama (1B / 3B / 8B, one GPU).

benchmarks/data/h200-reference/training_probe.jsonl was measured on one NVIDIA H200 SXM
(PyTorch 2.11, 2026-12-04) by benchmarks/data/h200-reference/train_probe.py:
``LlamaForCausalLM`` (SDPA attention, fp32-upcast loss, eager), fused AdamW, either FSDP2 on a
one-GPU mesh (torchtitan's recipe: bf16 parameters, fp32 reduce) or fp32 weights under
autocast. Each row is estimated as the scenario that describes it — catalog H200 SXM, one GPU,
engine torchtitan (FSDP2, eager, upcast loss) for ``fsdp2`` and ``amp`` alike, ZeRO-3 for
FSDP2, ZeRO-0 for AMP (fp32 weights and grads and Adam: the same 16 B per parameter as bf16 training with fp32 master weights) — and the step time, peak allocated, peak reserved and
nvidia-smi figures are compared. Nothing here is fitted: the kernel model's constants come from
the kernel table, not from these rows.

The measured memory of five rows carries models of the configurations run before them in the
same process (``LEFTOVER``): train_probe.py frees each model with ``del model ...;
torch.cuda.empty_cache()`` and no ``gc.collect()``, and FSDP2's modules sit in reference cycles
(torch/distributed/fsdp/_fully_shard: "permit ref cycle because 1:1 lifetime"), so a freed
model's sharded fp32 parameters (4 B per parameter) stay allocated until Python's collector
runs, and ``reset_peak_memory_stats()`` starts the next row's peak on top of them. Each row's
excess over its own step is a whole number of earlier models to within 0.07 GiB (1B: 4.60 GiB,
3B: 11.97 GiB; the first and the last row carry none), so those bytes are taken off the
measured allocated, reserved and nvidia-smi figures before the comparison. To measure them
clean on a GPU: ``gc.collect()`` before ``torch.cuda.empty_cache()`` in train_probe.py.

    .venv/bin/python benchmarks/h200_probe.py [--engine torchtitan|hf]

``--engine hf`` estimates the FSDP2 rows as the Hugging Face stack's record with backend fsdp2
(Accelerate's FSDP2 plugin under mixed precision: fp32 sharded parameters, bf16 compute, the
Trainer's fp32-upcast loss), which is what those rows ran apart from the training loop; the AMP
rows (fp32 weights under autocast, no wrapper) have no such record and are left out.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.estimate import estimate  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402

PROBE = ROOT / "benchmarks" / "data" / "h200-reference" / "training_probe.jsonl"
GIB = 2 ** 30
# The probe's model shapes (train_probe.py SHAPES), as scenario model fields.
SHAPES = {
    "llama3.2-1b": dict(layers=16, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192,
                        vocab=128256, tied_embeddings=True),
    "llama3.2-3b": dict(layers=28, hidden=3072, heads=24, kv_heads=8, ffn_hidden=8192,
                        vocab=128256, tied_embeddings=True),
    "llama3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                      vocab=128256, tied_embeddings=False),
}


# The earlier configurations' models still allocated when a row was measured (see the module
# docstring), by row (shape, recipe, seq, micro-batch, recompute): 4 B per parameter of each.
LEFTOVER = {
    ("llama3.2-1b", "fsdp2", 4096, 4, "none"): ("llama3.2-1b",),
    ("llama3.2-1b", "fsdp2", 4096, 4, "full"): ("llama3.2-1b", "llama3.2-1b"),
    ("llama3.2-1b", "amp", 4096, 2, "none"): ("llama3.2-1b",),
    ("llama3.2-3b", "fsdp2", 4096, 2, "none"): ("llama3.2-1b",),
    ("llama3.2-3b", "fsdp2", 8192, 1, "full"): ("llama3.2-1b", "llama3.2-3b"),
}
PARAMS = {"llama3.2-1b": 1235814400, "llama3.2-3b": 3212749824}   # the probe's own counts


def leftover_bytes(row: dict) -> float:
    """The earlier models' fp32 parameters allocated when ``row`` was measured."""
    key = (row["shape"], row["recipe"], row["seq"], row["micro_batch"], row["recompute"])
    return 4.0 * sum(PARAMS[m] for m in LEFTOVER.get(key, ()))


def scenario(row: dict, engine: str = "torchtitan") -> dict:
    """The scenario document one probe row ran, with ``engine``'s record."""
    fsdp = row["recipe"] == "fsdp2"
    training = {"engine": engine, "backend": "fsdp2"} if engine == "hf" else \
        {"engine": engine}
    return {
        "hardware": {"gpu": "h200-sxm", "gpus_per_node": 1, "nodes": 1},
        "model": {"name": row["shape"], "mlp": "swiglu", "norm": "rmsnorm",
                  **SHAPES[row["shape"]]},
        "parallel": {"dp": 1, "zero": 3 if fsdp else 0},
        "training": {"seq_len": row["seq"], "micro_batch": row["micro_batch"],
                     "global_batch": row["micro_batch"], "precision": "bf16",
                     "recompute": row["recompute"], "attention": "flash3", **training},
    }


def compare(row: dict, engine: str = "torchtitan") -> dict:
    """Measured and estimated figures of one probe row, and their ratios."""
    s = parse_scenario(scenario(row, engine))
    est = estimate(s)
    mem = est.memory.per_gpu
    gone = leftover_bytes(row) / GIB
    out = {"config": f"{row['shape']} {row['recipe']} seq {row['seq']} mb {row['micro_batch']} "
                     f"recompute {row['recompute']}", "leftover_gib": gone}
    for key, ours, theirs in (("step", est.time.step, row["step_s_median"]),
                              ("allocated", mem.total / GIB, row["allocated_gib"] - gone),
                              ("reserved", mem.reserved / GIB, row["reserved_gib"] - gone),
                              ("nvidia-smi", mem.device / GIB, row["smi_used_gib"] - gone)):
        out[key] = (theirs, ours, ours / theirs - 1)
    return out


def rows() -> list[dict]:
    """The probe's measured rows (those that ran)."""
    return [r for r in (json.loads(line) for line in PROBE.read_text().splitlines()
                        if line.strip()) if "error" not in r]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("torchtitan", "hf"), default="torchtitan")
    engine = parser.parse_args(argv).engine
    results = [compare(r, engine) for r in rows() if engine != "hf" or r["recipe"] == "fsdp2"]
    keys = ("step", "allocated", "reserved", "nvidia-smi")
    print(f"{'config':52} " + " ".join(f"{k:>24}" for k in keys))
    for r in results:
        print(f"{r['config']:52} " + " ".join(
            f"{r[k][0]:8.3f} {r[k][1]:8.3f} {r[k][2]:+6.1%}" for k in keys))
    print()
    for k in keys:
        errs = [abs(r[k][2]) for r in results]
        print(f"{k:11} median |error| {statistics.median(errs):5.1%}  max {max(errs):5.1%}  "
              f"({len(errs)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
