"""Model presets: published decoder-only transformers and small trial models.

Every figure of a published preset is checked against the model's own config (Hugging Face
``config.json``, the reference code, or the paper's hyperparameter table); ``source`` names it,
with any padding or approximation. Keys are lowercase; ``MODELS[key].name`` is the display name.

Parameter counts in the comments (and in ``extra["expected_params"]``) follow the shape family:
  embeddings   vocab * hidden, twice when untied (input table + output projection)
  attention    q: hidden * heads*head_dim, k and v: hidden * kv_dim each, o: heads*head_dim * hidden
  MLP          swiglu 3 * hidden * ffn; gelu 2 * hidden * ffn
  MoE layer    (experts + shared_experts) MLPs of expert_ffn_hidden, plus a router of hidden * experts
  norms        two per layer and one final; rmsnorm has a weight (hidden), layernorm weight and bias
  bias=True    biases on q, k, v, o and both MLP linears (GPT-2/GPT-3 and Megatron's default)
Learned position embeddings have no field in ``ModelShape``; where a model has them,
``extra["position_embeddings"]`` gives their number of rows and the comment gives the count with
and without them (``expected_params`` excludes them). ``extra["published_params"]`` is the
total the model's authors or its checkpoint report.
"""
from workbench.catalog.published_models import PUBLISHED
from workbench.catalog.types import ModelShape, MoE

_TRIAL = "workbench trial model (not a published model)"

MODELS: dict[str, ModelShape] = {
    # ---------------------------------------------------------------- Llama 3.1 (dense, GQA)
    # Expected 8,030,261,248 params (8.03e9); the checkpoint holds 8,030,261,248 (8.03B): exact.
    "llama3-8b": ModelShape(
        name="Llama 3.1 8B",
        layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        max_seq_len=131072,
        source=(
            "huggingface.co/meta-llama/Llama-3.1-8B config.json (hidden_size 4096, "
            "intermediate_size 14336, num_hidden_layers 32, num_attention_heads 32, "
            "num_key_value_heads 8, vocab_size 128256, tie_word_embeddings false, "
            "max_position_embeddings 131072); cross-checked with torchtitan "
            "torchtitan/models/llama3/__init__.py '8B' (ffn from multiple_of 1024, "
            "ffn_dim_multiplier 1.3 -> 14336) and Llama 3 Herd of Models (arXiv:2407.21783) "
            "Table 3. Shapes are those of Llama 3.1; Llama 3 (Apr 2024) has the same shapes "
            "with an 8192 context. max_seq_len 131072 is Llama 3.1's (pre-trained at 8192, "
            "then extended with llama3 RoPE scaling)."
        ),
        extra={"rope_theta": 500000.0, "pretrain_seq_len": 8192,
               "expected_params": 8_030_261_248, "published_params": 8.03e9},
    ),
    # Expected 70,553,706,496 params (70.55e9); published 70.6B: exact.
    "llama3-70b": ModelShape(
        name="Llama 3.1 70B",
        layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        max_seq_len=131072,
        source=(
            "huggingface.co/meta-llama/Llama-3.1-70B config.json (hidden_size 8192, "
            "intermediate_size 28672, num_hidden_layers 80, num_attention_heads 64, "
            "num_key_value_heads 8, vocab_size 128256, tie_word_embeddings false); "
            "cross-checked with torchtitan llama3 '70B' (multiple_of 4096, "
            "ffn_dim_multiplier 1.3 -> 28672) and arXiv:2407.21783 Table 3. "
            "max_seq_len 131072 is Llama 3.1's (Llama 3: 8192)."
        ),
        extra={"rope_theta": 500000.0, "pretrain_seq_len": 8192,
               "expected_params": 70_553_706_496, "published_params": 70.6e9},
    ),
    # Expected 405,853,388,800 params (405.85e9); published 405.9B (HF: "406B"): exact.
    "llama3-405b": ModelShape(
        name="Llama 3.1 405B",
        layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248, vocab=128256,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        max_seq_len=131072,
        source=(
            "huggingface.co/meta-llama/Llama-3.1-405B config.json (hidden_size 16384, "
            "intermediate_size 53248, num_hidden_layers 126, num_attention_heads 128, "
            "num_key_value_heads 8, vocab_size 128256, tie_word_embeddings false); "
            "cross-checked with torchtitan llama3 '405B' (multiple_of 4096, "
            "ffn_dim_multiplier 1.2 -> 53248) and arXiv:2407.21783 Table 3 (8 KV heads; "
            "Meta's original 16-way model-parallel checkpoint stores the KV heads "
            "replicated to 16, which is a storage layout, not the model). "
            "max_seq_len 131072 (Llama 3.1)."
        ),
        extra={"rope_theta": 500000.0, "pretrain_seq_len": 8192,
               "expected_params": 405_853_388_800, "published_params": 405.9e9},
    ),
    # Expected 1,235,814,400 params (1.24e9; input and output embeddings tied);
    # the checkpoint holds 1,235,814,400 (1.24B): exact.
    "llama3.2-1b": ModelShape(
        name="Llama 3.2 1B",
        layers=16, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192, vocab=128256,
        mlp="swiglu", tied_embeddings=True, norm="rmsnorm", bias=False, dropout=False,
        head_dim=64, max_seq_len=131072,
        source=(
            "huggingface.co/meta-llama/Llama-3.2-1B config.json (hidden_size 2048, "
            "intermediate_size 8192, num_hidden_layers 16, num_attention_heads 32, "
            "num_key_value_heads 8, head_dim 64, vocab_size 128256, "
            "tie_word_embeddings true, max_position_embeddings 131072, rope_scaling "
            "llama3 factor 32 from 8192)."
        ),
        extra={"rope_theta": 500000.0,
               "expected_params": 1_235_814_400, "published_params": 1.24e9},
    ),
    # ---------------------------------------------------------------- Mistral 7B (dense, GQA, SWA)
    # Expected 7,241,732,096 params (7.24e9); the checkpoint holds 7.24B: exact.
    "mistral-7b": ModelShape(
        name="Mistral 7B v0.1",
        layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        max_seq_len=8192,
        source=(
            "huggingface.co/mistralai/Mistral-7B-v0.1 config.json (hidden_size 4096, "
            "intermediate_size 14336, num_hidden_layers 32, num_attention_heads 32, "
            "num_key_value_heads 8, vocab_size 32000, tie_word_embeddings false, "
            "sliding_window 4096) and Mistral 7B (arXiv:2310.06825) Table 1 "
            "(context_len 8192, window_size 4096). The config's max_position_embeddings "
            "32768 is the RoPE table, not the training context. Sliding-window attention "
            "has no field here: the shape family treats attention as full causal, which "
            "overstates attention FLOPs for sequences longer than 4096."
        ),
        extra={"sliding_window": 4096, "rope_theta": 10000.0,
               "expected_params": 7_241_732_096, "published_params": 7.24e9},
    ),
    # ---------------------------------------------------------------- GPT-3 175B (dense, MHA)
    # Expected 174,579,093,504 params without position embeddings (174.58e9);
    # 174,604,259,328 with the 2048 x 12288 learned position table (174.60e9).
    # Published: 175.0B (Brown et al. Table 2.1, rounded) -> ours is 0.23% under.
    # With Megatron's padded vocab 51200 and position embeddings: 174,615,846,912.
    "gpt3-175b": ModelShape(
        name="GPT-3 175B",
        layers=96, hidden=12288, heads=96, kv_heads=96, ffn_hidden=49152, vocab=50257,
        mlp="gelu", tied_embeddings=True, norm="layernorm", bias=True, dropout=True,
        max_seq_len=2048,
        source=(
            "Language Models are Few-Shot Learners (Brown et al. 2020, arXiv:2005.14165) "
            "Table 2.1: n_layers 96, d_model 12288, n_heads 96, d_head 128, n_ctx 2048; "
            "architecture as GPT-2 (tied input/output embeddings, pre-LayerNorm, GELU, "
            "d_ff = 4 d_model = 49152). Megatron-LM examples/gpt3/"
            "train_gpt3_175b_distributed.sh: --num-layers 96 --hidden-size 12288 "
            "--num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048 "
            "with Megatron defaults ffn_hidden_size = 4 * hidden, biases on every linear, "
            "tied embeddings, hidden and attention dropout 0.1. vocab: the GPT-2 BPE's "
            "50257 tokens, unpadded; Megatron pads it to a multiple of "
            "128 * tensor-parallel size (51200 at TP 8); the estimator counts the unpadded "
            "vocabulary (PyTorch pads nothing): set model.vocab to 51200 to match a "
            "Megatron run. Learned position embeddings (2048 rows) are recorded in "
            "extra and are not in expected_params. GPT-3's alternating locally banded "
            "sparse attention layers are not modelled (dense attention throughout, as "
            "Megatron trains it)."
        ),
        extra={"position_embeddings": 2048, "megatron_padded_vocab_tp8": 51200,
               "expected_params": 174_579_093_504, "published_params": 175.0e9},
    ),
    # Expected 123,653,376 params without position embeddings;
    # 124,439,808 with the 1024 x 768 learned position table = the published 124M: exact.
    "gpt2-small": ModelShape(
        name="GPT-2 small (124M)",
        layers=12, hidden=768, heads=12, kv_heads=12, ffn_hidden=3072, vocab=50257,
        mlp="gelu", tied_embeddings=True, norm="layernorm", bias=True, dropout=True,
        max_seq_len=1024,
        source=(
            "huggingface.co/openai-community/gpt2 config.json (n_layer 12, n_embd 768, "
            "n_head 12, n_inner null -> 4 * 768 = 3072, vocab_size 50257, n_positions 1024, "
            "activation_function gelu_new, resid/embd/attn_pdrop 0.1; lm_head tied to wte). "
            "The GPT-2 paper's Table 2 calls this size 117M; the checkpoint holds 124M. "
            "Learned position embeddings (1024 rows) are in extra, not in expected_params."
        ),
        extra={"position_embeddings": 1024,
               "expected_params": 123_653_376, "published_params": 124.4e6},
    ),
    # ---------------------------------------------------------------- Mixtral 8x7B (MoE)
    # Expected 46,702,792,704 params (46.70e9), 12,879,925,248 active per token (12.88e9);
    # published 46.7B total / 12.9B active: exact (router 4096 x 8 per layer included).
    "mixtral-8x7b": ModelShape(
        name="Mixtral 8x7B",
        layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        moe=MoE(experts=8, top_k=2, expert_ffn_hidden=14336),
        max_seq_len=32768,
        source=(
            "huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json (hidden_size 4096, "
            "intermediate_size 14336, num_hidden_layers 32, num_attention_heads 32, "
            "num_key_value_heads 8, vocab_size 32000, num_local_experts 8, "
            "num_experts_per_tok 2, max_position_embeddings 32768, rope_theta 1e6, "
            "tie_word_embeddings false) and Mixtral of Experts (arXiv:2401.04088) Table 1. "
            "Every layer is MoE; ffn_hidden equals the expert size (there is no dense MLP)."
        ),
        extra={"rope_theta": 1e6, "expected_params": 46_702_792_704,
               "expected_active_params": 12_879_925_248,
               "published_params": 46.7e9, "published_active_params": 12.9e9},
    ),
    # ---------------------------------------------------------------- DeepSeek-V3 (MLA + MoE)
    # Expected 671,026,404,352 params (671.03e9), 37,552,282,624 active per token (37.55e9);
    # published 671B total / 37B activated (arXiv:2412.19437): +0.004 % / +1.5 %. Multi-head
    # latent attention per layer: wq_a 7168x1536 + q_norm 1536 + wq_b 1536x24576 + wkv_a
    # 7168x576 + kv_norm 512 + wkv_b 512x32768 + wo 16384x7168 = 187,107,328. The reference
    # code's total, 671,026,419,200, adds the router's score-correction bias (256 per MoE
    # layer, 14,848 in all), which the shape family does not count.
    "deepseek-v3": ModelShape(
        name="DeepSeek-V3",
        layers=61, hidden=7168, heads=128, kv_heads=128, ffn_hidden=18432, vocab=129280,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        head_dim=128,
        q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
        v_head_dim=128,
        moe=MoE(experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1,
                dense_layers=3),
        max_seq_len=131072,
        source=(
            "huggingface.co/deepseek-ai/DeepSeek-V3 config.json (hidden_size 7168, "
            "intermediate_size 18432, moe_intermediate_size 2048, num_hidden_layers 61, "
            "num_attention_heads 128, num_key_value_heads 128, n_routed_experts 256, "
            "n_shared_experts 1, num_experts_per_tok 8, first_k_dense_replace 3, "
            "vocab_size 129280, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, "
            "qk_rope_head_dim 64, v_head_dim 128, tie_word_embeddings false, "
            "max_position_embeddings 163840); deepseek-ai/DeepSeek-V3 "
            "inference/configs/config_671B.json and inference/model.py (MLA, Gate); "
            "DeepSeek-V3 Technical Report (arXiv:2412.19437) sec. 4.2: 671B total, 37B "
            "activated, context extended 4K -> 32K -> 128K with YaRN (max_seq_len 131072). "
            "Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 sec. 2.1) from the "
            "config's q_lora_rank / kv_lora_rank / qk_rope_head_dim / qk_nope_head_dim / "
            "v_head_dim: query path wq_a 7168x1536, q_norm, wq_b 1536x(128 x 192); joint KV "
            "compression wkv_a 7168x(512 + 64), kv_norm, wkv_b 512x(128 x (128 + 128)); "
            "wo (128 x 128)x7168; qk head dim 192, v head dim 128. head_dim 128 "
            "(= v_head_dim) and kv_heads 128 are what Megatron's --kv-channels and the TP "
            "divisibility rules see; MLA ignores them. Not modelled: the router's per-expert "
            "score-correction bias (256 per MoE layer) and the multi-token-prediction module "
            "(1 layer, 11.5B unique params, not part of the 671B)."
        ),
        extra={
            "attention": "mla",
            "attention_params_per_layer": 187_107_328,
            "router_score_bias_per_moe_layer": 256,
            "mtp_layers": 1, "mtp_unique_params": 11.5e9,
            "rope_theta": 10000.0, "pretrain_seq_len": 4096,
            "expected_params": 671_026_404_352,
            "expected_active_params": 37_552_282_624,
            "reference_code_params": 671_026_419_200,        # + router score-correction bias
            "reference_code_active_params": 37_552_297_472,
            "published_params": 671e9, "published_active_params": 37e9,
        },
    ),
    # ---------------------------------------------------------------- trial models (CPU, gloo)
    # Small enough for a 2-core CPU to train in real multi-process runs. Layers 4 split for
    # pp 1/2/4; vocab 1024 and (where noted) heads, KV heads and FFN split for tp up to 8.
    # tiny-dense: expected 988,288 params (0.99e6).
    "tiny-dense": ModelShape(
        name="tiny-dense",
        layers=4, hidden=128, heads=16, kv_heads=8, ffn_hidden=344, vocab=1024,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        max_seq_len=256,
        source=(
            _TRIAL + ": Llama-style (swiglu, rmsnorm, no bias, untied, GQA 2:1). "
            "16 heads / 8 KV heads (head_dim 8) so both divide tp = 1, 2, 4, 8; "
            "ffn 344 = 8/3 * 128 rounded up to a multiple of 8 (43 per rank at tp 8)."
        ),
        extra={"expected_params": 988_288},
    ),
    # tiny-moe: expected 2,233,472 params (2.23e6), 1,053,824 active per token.
    "tiny-moe": ModelShape(
        name="tiny-moe",
        layers=4, hidden=128, heads=8, kv_heads=4, ffn_hidden=128, vocab=1024,
        mlp="swiglu", tied_embeddings=False, norm="rmsnorm", bias=False, dropout=False,
        moe=MoE(experts=8, top_k=2, expert_ffn_hidden=128, shared_experts=1),
        max_seq_len=256,
        source=(
            _TRIAL + ": every layer MoE, 8 routed experts (ep 1/2/4/8), top-2, one shared "
            "expert; ffn_hidden equals the expert size (no dense layers). 8 heads / 4 KV "
            "heads (head_dim 16): KV heads split evenly only for tp <= 4."
        ),
        extra={"expected_params": 2_233_472, "expected_active_params": 1_053_824},
    ),
    # tiny-gpt: expected 924,416 params without position embeddings, 957,184 with them.
    "tiny-gpt": ModelShape(
        name="tiny-gpt",
        layers=4, hidden=128, heads=8, kv_heads=8, ffn_hidden=512, vocab=1024,
        mlp="gelu", tied_embeddings=True, norm="layernorm", bias=True, dropout=True,
        max_seq_len=256,
        source=(
            _TRIAL + ": GPT-2/GPT-3 style (gelu MLP of 4 * hidden, layernorm, biases, tied "
            "embeddings, dropout, learned position embeddings of max_seq_len rows); "
            "8 heads (head_dim 16) divide tp = 1, 2, 4, 8."
        ),
        extra={"position_embeddings": 256, "expected_params": 924_416},
    ),
}

# The published checkpoints of ``published_models.py`` after the hand-written presets, the trial
# models last (the order the page's model picker lists them in).
_TRIAL_KEYS = [k for k, m in MODELS.items() if m.source.startswith(_TRIAL)]
MODELS = {**{k: m for k, m in MODELS.items() if k not in _TRIAL_KEYS}, **PUBLISHED,
          **{k: MODELS[k] for k in _TRIAL_KEYS}}
