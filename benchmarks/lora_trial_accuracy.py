"""Saved activations of real LoRA / QLoRA / full fine-tuning trials (gloo, 2 ranks, PEFT's own
adapters on the trial model) against the estimator's prediction, for several adapter targets.
Model-state bytes and data-parallel traffic are asserted exact in tests/test_trials_lora.py.

    .venv/bin/python benchmarks/lora_trial_accuracy.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.scenario import parse_scenario  # noqa: E402
from workbench.trial import run_trial  # noqa: E402

CASES = [{"method": "lora", "lora": {"rank": 4, "targets": ["q", "v"]}},
         {"method": "lora", "lora": {"rank": 8, "alpha": 16, "targets": ["q", "v", "down"],
                                     "trainable": ["norms"]}},
         {"method": "lora", "lora": {"rank": 8, "targets": "all-linear", "trainable": ["norms"]}},
         {"method": "lora", "lora": {"rank": 8, "targets": "attention"}},
         {"method": "lora", "lora": {"rank": 8, "targets": "mlp"}},
         {"method": "qlora", "lora": {"rank": 4, "targets": "all-linear"}},
         {"method": "full"}]


def main() -> int:
    for training in CASES:
        s = parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
                            "model": "tiny-dense", "parallel": {"dp": 2},
                            "training": {"seq_len": 256, "global_batch": 16, **training}})
        rank = run_trial(s, steps=2).ranks()[0]
        m, p = rank["measured"]["activations"], rank["predicted"]["activations"]
        label = f"{training['method']} {training.get('lora', '')}"
        print(f"{label:90} measured {m:9,.0f} B  predicted {p:9,.0f} B  {p / m - 1:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
