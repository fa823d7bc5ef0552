"""Catalog figures: present, sourced, and not the brief's wrong numbers."""
from __future__ import annotations

import dataclasses

import pytest

from workbench.catalog import CATALOGS, CPUS, DRIVES, GPUS, LINKS, MODELS, lookup
from workbench.estimate.model.params import active_params, total_params

REQUIRED = {
    "gpu": ["h200-sxm", "h200-nvl", "h100-sxm", "h100-pcie", "a100-sxm-80gb", "a100-sxm-40gb",
            "b200", "rtx-4090"],
    "link": ["nvlink3", "nvlink4", "nvlink5", "pcie-gen4", "pcie-gen5", "100gbe", "100gbe-rdma",
             "200gbe", "200gbe-rdma", "400gbe", "400gbe-rdma", "ib-hdr", "ib-ndr"],
    "cpu": ["ryzen-9-9950x3d", "threadripper-pro-7995wx", "epyc-9654"],
    "memory": ["ddr4-3200", "ddr5-4800", "ddr5-5600", "ddr5-6000", "ddr5-6400"],
    "drive": ["samsung-980-pro-2tb", "pcie4-nvme", "pcie5-nvme"],
    "model": ["llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b", "mixtral-8x7b",
              "deepseek-v3", "tiny-dense", "tiny-moe"],
}


@pytest.mark.parametrize("kind", sorted(REQUIRED))
def test_required_entries_exist_with_a_source(kind):
    table = CATALOGS[kind]
    for key in REQUIRED[kind]:
        assert key in table, f"{kind} {key} missing"
    for key, rec in table.items():
        assert key == key.lower()
        assert len(rec.source) > 20, f"{kind} {key} has no real source"
        for f in dataclasses.fields(rec):
            v = getattr(rec, f.name)
            if isinstance(v, float):
                assert v >= 0


def test_lookup_is_case_insensitive_and_lists_allowed_keys():
    assert lookup("gpu", "H200-SXM") is GPUS["h200-sxm"]
    with pytest.raises(KeyError, match="allowed: .*h200-sxm"):
        lookup("gpu", "h201")


def test_h200_datasheet_figures_not_the_briefs():
    g = GPUS["h200-sxm"]
    assert g.memory_gb == 141 and g.hbm_gb_per_s == 4800 and g.power_w == 700
    assert 980 <= g.bf16_tflops <= 990 and 1970 <= g.fp8_tflops <= 1980  # dense, not sparse
    assert GPUS["h200-nvl"].power_w == 600
    for gpu in GPUS.values():   # the brief's "32 GB, 1.2 TFLOP FP8, 450 W" H200 is not in it
        if gpu.name.startswith("NVIDIA H200"):
            assert gpu.memory_gb != 32 and gpu.fp8_tflops > 1000


def test_links_are_per_direction():
    assert LINKS["nvlink4"].gb_per_s == 450      # 900 GB/s is the bidirectional total
    assert LINKS["400gbe-rdma"].gb_per_s == 50   # 400 Gbit/s
    assert LINKS["400gbe-rdma"].rdma and not LINKS["400gbe"].rdma
    assert LINKS["pcie-gen5"].gb_per_s == pytest.approx(63.0, rel=0.02)


def test_host_parts_that_the_brief_gets_wrong():
    assert DRIVES["samsung-980-pro-2tb"].pcie_gen == 4          # not PCIe 5.0
    assert CPUS["ryzen-9-9950x3d"].pcie_lanes == 24              # not 8 x16 = 128
    assert CPUS["ryzen-9-9950x3d"].memory_channels == 2
    assert CPUS["threadripper-pro-7995wx"].pcie_lanes >= 128


@pytest.mark.parametrize("key", [k for k, m in MODELS.items() if "expected_params" in m.extra])
def test_model_parameter_counts_match_the_published_shapes(key):
    m = MODELS[key]
    positions = int(m.extra.get("position_embeddings", 0)) * m.hidden
    assert total_params(m) - positions == m.extra["expected_params"]
    if "expected_active_params" in m.extra:
        assert active_params(m) == m.extra["expected_active_params"]


@pytest.mark.parametrize("key,published,tol", [
    ("llama3-8b", 8.03e9, 0.005), ("llama3-70b", 70.6e9, 0.005), ("llama3-405b", 405.9e9, 0.005),
    ("gpt3-175b", 175e9, 0.01), ("mixtral-8x7b", 46.7e9, 0.005),
    ("deepseek-v3", 671e9, 0.001),  # MLA: +0.004 % (exact counts in tests/test_mla.py)
])
def test_totals_close_to_published(key, published, tol):
    assert total_params(MODELS[key]) == pytest.approx(published, rel=tol)


def test_an_mi300x_node_gets_its_infinity_fabric_not_an_nvlink():
    """A scenario naming no intra-node link takes the GPU's own: the MI300X's 7-link Infinity
    Fabric mesh (448 GB/s per direction, AMD's datasheet), not NVLink 4."""
    from workbench.scenario import parse_scenario
    s = parse_scenario({"hardware": {"gpu": "mi300x", "gpus_per_node": 8},
                        "model": {"preset": "llama3-8b"}, "parallel": {"dp": 8}})
    assert s.hardware.intra_node is LINKS["infinity-fabric"]
    assert s.hardware.intra_node.gb_per_s == 7 * 128 / 2


# -- the published checkpoints people train (workbench/catalog/published_models.py) ---------

def test_the_catalog_holds_the_models_people_train_each_with_its_source():
    from workbench.catalog.published_models import PUBLISHED

    published = [k for k, m in MODELS.items() if not m.source.startswith("workbench trial")]
    assert len(published) >= 50
    families = ("llama3.2-3b", "llama3.3-70b", "llama4-scout-17b-16e", "qwen2.5-7b", "qwen3-8b",
                "qwen3-30b-a3b", "gemma2-9b", "gemma3-27b", "mistral-nemo-12b", "phi-4",
                "deepseek-v2-lite", "deepseek-r1-distill-qwen-32b", "gpt-oss-20b", "olmo-2-7b",
                "smollm2-1.7b", "smollm3-3b", "granite-3.1-8b", "starcoder2-15b")
    assert set(families) <= set(MODELS)
    for key, m in PUBLISHED.items():
        # a quoted config (repository @ commit, or the page) and the card's own figure
        assert ("@" in m.source or "http" in m.source) and '"' in m.source, key
        assert m.extra["published"] and m.extra["hf_id"].count("/") == 1, key


@pytest.mark.parametrize("key", sorted(
    k for k, m in MODELS.items() if "config_params" in m.extra))
def test_a_published_checkpoint_counts_what_its_config_implies(key):
    """The shape family's count within 1 % of the count the checkpoint's config implies (with
    the q/k/v biases, QK-norms and extra norms the family leaves out: all within 0.01 %)."""
    m = MODELS[key]
    assert total_params(m) == pytest.approx(m.extra["config_params"], rel=0.01)
    if m.moe is not None and "config_active_params" in m.extra:
        assert active_params(m) == pytest.approx(m.extra["config_active_params"], rel=0.01)


@pytest.mark.parametrize("key,exact", [
    # the Hugging Face API's safetensors totals and keras-hub's preset counts, quoted in the
    # records' sources
    ("deepseek-r1-distill-qwen-32b", 32_763_876_352), ("deepseek-r1-distill-llama-8b",
                                                       8_030_261_248),
    ("gpt-oss-20b", 20_914_757_184), ("gpt-oss-120b", 116_829_156_672),
    ("mistral-7b-v0.3", 7_248_023_552), ("phi-3-mini", 3_821_079_552)])
def test_counts_against_exact_published_totals(key, exact):
    assert total_params(MODELS[key]) == pytest.approx(exact, rel=0.002)


def test_hub_ids_torchtune_builders_and_torchtitan_flavors_reach_the_catalog():
    from workbench.imports.hf_model import catalog_ids
    from workbench.imports.torchtitan import PRESETS as FLAVORS
    from workbench.imports.torchtune import PRESETS as BUILDERS

    ids = catalog_ids()
    assert ids["Qwen/Qwen2.5-7B"] == "qwen2.5-7b" and ids["google/gemma-2-9b"] == "gemma2-9b"
    assert BUILDERS["qwen2_5_7b_instruct"] == "qwen2.5-7b" and BUILDERS["phi4_14b"] == "phi-4"
    assert FLAVORS[("qwen3", "30B-A3B")] == "qwen3-30b-a3b"
    assert FLAVORS[("deepseek_v3", "16B")] == "deepseek-v2-lite"
    for key in (*ids.values(), *BUILDERS.values(), *FLAVORS.values()):
        assert key in MODELS


def test_a_model_the_catalog_lacks_is_refused_never_replaced():
    from workbench.imports import torchtitan, torchtune

    r = torchtune.read("r.yaml", "model:\n  _component_: torchtune.models.foo.lora_foo_9b\n"
                                 "  lora_attn_modules: [q_proj]\n")
    assert "preset" not in r.document.get("model", {})
    assert any("is not in the workbench's model catalog: pass the model's config.json" in
               p.message for p in r.problems)
    r = torchtitan.read("t.toml", "[model]\nname = 'llama3'\nflavor = '13B'\n")
    assert "model" not in r.document
    assert any(p.path == "t.toml:model.flavor" for p in r.problems)
    from workbench.errors import ScenarioError
    from workbench.scenario import parse_scenario
    with pytest.raises(ScenarioError, match="did you mean qwen2.5-7b"):
        parse_scenario({"hardware": {"gpu": "h100-sxm"}, "model": {"preset": "qwen2.5-8b"},
                        "parallel": {"dp": 8}})


def test_lora_groups_stand_for_the_projections_a_gelu_model_has():
    """Issue 54: "all-linear" was refused on a model with a two-matrix (GELU) MLP, because it
    expanded to a gate projection the model does not have."""
    from workbench.errors import ScenarioError
    from workbench.scenario import parse_scenario

    doc = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "parallel": {"dp": 8},
           "model": {"preset": "starcoder2-7b"}, "training": {"method": "lora"}}
    s = parse_scenario(doc)                               # the default group, all-linear
    assert s.training.lora.targets == ("q", "k", "v", "o", "up", "down")
    assert s.document["training"]["lora"]["targets"] == ["q", "k", "v", "o", "up", "down"]
    assert parse_scenario(s.to_dict()).training.lora == s.training.lora   # reads back
    doc["training"]["lora"] = {"targets": "mlp"}
    assert parse_scenario(doc).training.lora.targets == ("up", "down")
    doc["training"]["lora"] = {"targets": ["gate", "up"]}                 # named: refused
    with pytest.raises(ScenarioError, match="a GELU MLP has no gate projection"):
        parse_scenario(doc)
