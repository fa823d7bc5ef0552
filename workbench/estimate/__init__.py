"""The analytic estimator: scenario -> Estimate. This docstring is the index of its rooms: where
each cost lives and which test holds it (tests/test_house.py checks that it names every module
and test here).

Floors, lowest first; a room imports only the rooms below it (tests/test_house.py):

``arrays``, ``placement``   the ground every room stands on: numbers or arrays (``plain``);
                            how a group of ranks sits on the nodes (``Span``, ``group_span``;
                            test_comm_forms.py, test_step_time.py).
``model/``                  the model's shapes and parameter counts.
    ``params``              parameters per layer, pipeline rank and GPU after TP/EP sharding;
                            pipeline placement (test_memory.py, test_catalog.py, test_mla.py)
    ``attention``           attention projections and kernel widths, GQA and MLA (test_mla.py)
    ``finetune``            which weights train, the frozen ones' stored format, the adapters
                            (test_finetune_estimate.py)
    ``flops``               FLOPs per layer, GPU and step (test_step_time.py, test_mla.py)
``memory/``                 bytes on a GPU (reads model/).
    ``model_states``        parameters, gradients, optimizer states per ZeRO stage and HSDP;
                            FP8 parameter gathers; a run's own state dtypes (test_memory.py,
                            test_fp8_casts.py, test_state_dtypes.py)
    ``optimizer_states``    state bytes per tensor as each optimizer library allocates them
                            (test_trials_lora.py)
    ``activations``         saved activations, Korthikanti et al. 2022 term by term;
                            Megatron's recomputed modules (test_memory.py, test_block_arrays.py,
                            test_mla.py, test_recompute_modules.py)
    ``buffers``             transient buffers: gathers, loss, working copies; the allocator's
                            reserved bytes (test_peak_memory.py, test_nvfp4.py)
    ``peak``                the peak as a moment of the step (test_peak_memory.py)
    ``allocator``           reserved: what the caching allocator keeps on side streams; what a
                            step needs at the GPU's limit (test_engines.py, test_peak_memory.py)
    ``device``              what nvidia-smi shows above reserved: CUDA context, NCCL
                            communicators (test_device_memory.py)
    ``fit``                 does it fit: pass, tight or fail with the memory band
                            (test_verdict.py, test_engines.py)
    ``records``             the per-GPU memory records the report shows (test_golden_estimates.py)
``time/``                   seconds of a step (reads model/ and memory/).
    ``kernels``             a kernel's time from its shape: GEMM, attention, memory-bound
                            (test_kernel_model.py, test_step_time.py)
    ``sustained``           the GEMM clock under the board's power limit
                            (test_sustained_clock.py)
    ``collectives``         a collective's time on the link tiers (test_comm_forms.py,
                            test_step_time.py)
    ``tp_overlap``          TP collectives overlapped with their GEMMs: async TP, TE
                            userbuffers (test_overlap.py)
    ``moe_block``           an MoE layer: router, experts, dispatch (test_moe_dispatch.py)
    ``fp8_casts``           HBM bytes of an FP8 recipe's casts (test_fp8_casts.py,
                            test_nvfp4.py)
    ``eager_ops``           operations the eager trial model dispatches (test_calibrate.py)
    ``engine_terms``        what an engine and its switches change (test_engines.py,
                            test_kernel_model.py); the error bands every estimate carries
                            are ``workbench.engines.accuracy``
    ``block_shapes``,       the per-microbatch cost of a dense layer, an MoE layer, the head
    ``block_costs``         and the embedding over a grid of shapes (test_block_arrays.py,
                            test_overlap.py)
    ``step_time``           the step's records and formulas: exposed DP communication, the
                            optimizer, offload (test_step_time.py)
    ``timeline``            the pipeline timeline of every schedule (test_step_time.py)
``run/``                    the whole run (reads model/, memory/, time/).
    ``run_level``           tokens/s, MFU, time to train, power, energy, cost
                            (test_step_time.py, test_golden_estimates.py)
    ``build_checks``        can one node be built: power, PCIe lanes, host memory, drives
                            (test_step_time.py, test_validation.py)
    ``verdict``             the one answer read first, with its parts and next steps
                            (test_verdict.py)
``cost_model/``             the one composition, over a grid of layouts (reads every room).
    ``block_table``         block costs, activations and parameters per (tp, cp, ep,
                            micro-batch), kept between calls (test_block_arrays.py)
    ``pipeline_ranks``,     the (layout, pipeline rank) rows a search or an estimate
    ``rows``                evaluates (test_grid.py, test_memory_pass_paths.py)
    ``memory_pass``         memory per row and whether a layout fits (test_memory_pass_paths.py)
    ``time_pass``           the step per row and layout (test_plan_pruning.py, test_grid.py)
    ``compose``             ``evaluate``: both passes (test_grid.py, test_golden_estimates.py)
``single``, ``result``      one scenario as a grid of one row, read into the memory, step-time
                            and run records; the Estimate and its JSON (test_golden_estimates.py,
                            test_docs.py).

Where a newcomer's question leads: the memory of a LoRA run is ``model.finetune.layer_split``
(which elements train) -> ``cost_model.memory_pass.finetune_states`` -> ``memory.model_states``;
the time of a TP collective is ``time.collectives`` -> ``time.block_costs`` (``_tp_layer``, with
``time.tp_overlap``) -> ``cost_model.time_pass`` -> ``single.step_time_of`` -> the waterfall
(``widgets/charts/step_time.py``). The trial's own prediction (PyTorch's conventions) is
``workbench.trial.prediction``; the planner's search is ``workbench.plan``.
"""
from __future__ import annotations

from workbench.estimate.memory.records import MemoryEstimate
from workbench.estimate.result import Estimate
from workbench.estimate.run.build_checks import build_checks
from workbench.estimate.run.run_level import estimate_run
from workbench.estimate.single import estimate_memory, evaluate_scenario, memory_of, step_time_of
from workbench.scenario.types import Scenario


def estimate(scenario: Scenario) -> Estimate:
    """Estimate a validated scenario: memory, step time, run-level figures, build checks."""
    ev = evaluate_scenario(scenario)
    mem = memory_of(scenario, ev)
    step = step_time_of(scenario, ev)
    run = estimate_run(scenario, step)
    checks = build_checks(scenario, mem)
    warnings = list(mem.warnings) + [f"build check {c.name}: {c.reason}" for c in checks
                                     if c.status == "fail"]
    return Estimate(scenario=scenario, memory=mem, time=step, run=run, checks=checks,
                    warnings=warnings)


__all__ = ["Estimate", "MemoryEstimate", "estimate", "estimate_memory"]
