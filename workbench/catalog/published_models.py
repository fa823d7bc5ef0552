"""Published checkpoints beyond the hand-written presets of ``models.py``: the models people
fine-tune and pre-train (Llama 3.2 / 3.3 / 4, Qwen2.5 / Qwen3 dense and MoE, Gemma 2 / 3,
Mistral, Phi-3 / 4, DeepSeek V2-Lite and R1 distills, gpt-oss, OLMo 2, SmolLM2 / 3, Granite 3.1,
StarCoder2, Falcon), one record each from the checkpoint's Hugging Face ``config.json`` or, where
that file was not found, the reference implementation's table (``source`` quotes the lines and
names repository, path and commit, or the page).

Each record maps onto ``ModelShape``: a gated GELU MLP (Gemma's GeGLU) is the gated
three-matrix family ``swiglu`` (the same weights, activations and FLOPs;
``extra["gated_activation"]`` says so); q/k/v-only biases (Qwen2), QK-norm weights and
Gemma's extra norms are a few thousand parameters per layer the shape family leaves out
(``extra`` names them); sliding-window attention is recorded in ``extra`` (the shape family
treats attention as full causal: the estimate's attention FLOPs are an upper bound for
sequences longer than the window). ``extra["config_params"]`` is the parameter count the
config implies, counted with those biases and norms; the shape family's count is within 0.01 %
of it for every record (tests/test_catalog.py). ``extra["published"]`` quotes the model card's
figure. Llama 4 Maverick is not here: its MoE layers alternate with dense ones, which the shape
family (leading dense layers, then MoE) cannot express.
"""
from workbench.catalog.types import ModelShape, MoE

# (key, Hugging Face id, shape fields, MoE or None, extra, source)
CARDS = (
    {
        'key': 'llama3.2-3b',
        'hf_id': 'meta-llama/Llama-3.2-3B',
        'shape': {
                     'name': 'Llama 3.2 3B',
                     'layers': 28,
                     'hidden': 3072,
                     'heads': 24,
                     'kv_heads': 8,
                     'ffn_hidden': 8192,
                     'vocab': 128256,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 3212749824,
                     'published': '"3B (3.21B)" (model card Params column)',
                     'notes': ('head_dim 128 = 3072/24. RoPE llama3 scaling factor 32, rope_theta'
                               ' 500000. head_dim 128 given explicitly in config but equals '
                               'hidden/heads.')},
        'source': ('HF config.json copy: citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Llama-3.2-3B": "head_dim": 128, "hidden_size": 3072, "intermediate_size": '
                   '8192, "max_position_embeddings": 131072, "num_attention_heads": 24, '
                   '"num_hidden_layers": 28, "num_key_value_heads": 8, "hidden_act": "silu", '
                   '"attention_bias": false, "mlp_bias": false, "tie_word_embeddings": true, '
                   '"vocab_size": 128256; same values in mlc-ai/mlc-llm '
                   'python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "llama3_2_3b"; torchtune '
                   'torchtune/models/llama3_2/_model_builders.py llama3_2_3b: vocab_size=128_256,'
                   ' num_layers=28, num_heads=24, num_kv_heads=8, embed_dim=3072, '
                   'max_seq_len=131072, intermediate_dim=8192, tie_word_embeddings=True. Params: '
                   'ZHUI/paddlenlp_model_readme @40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies'
                   ' of HF model cards) meta-llama/Llama-3.2-3B/index.md: "|  |  | 3B (3.21B) | '
                   'Multilingual Text |"'),
    },
    {
        'key': 'llama3.3-70b',
        'hf_id': 'meta-llama/Llama-3.3-70B-Instruct',
        'shape': {
                     'name': 'Llama 3.3 70B Instruct',
                     'layers': 80,
                     'hidden': 8192,
                     'heads': 64,
                     'kv_heads': 8,
                     'ffn_hidden': 28672,
                     'vocab': 128256,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 70553706496,
                     'published': '"70B" (model card Params column)',
                     'notes': ("The Llama-3.3 checkpoint's own config.json was not found "
                               'verbatim; values from litgpt (which cites that config), torchtune'
                               ' (aliases 3.1-70B) and the Llama-3.1-70B HF config (same '
                               'architecture). tie_word_embeddings=false taken from the 3.1-70B '
                               'config.')},
        'source': ('Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa (comment "# https://huggingface.co/'
                   'meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json"): '
                   'padded_vocab_size=128256, n_layer=80, n_head=64, n_embd=8192, '
                   'n_query_groups=8, bias=False, norm_class_name="RMSNorm", '
                   'mlp_class_name="LLaMAMLP", intermediate_size=28672, block_size=131072; '
                   'pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/llama3_3/_model_builders.py: "llama3_3_70b = llama3_1_70b" '
                   'with llama3_1_70b: vocab_size=128_256, num_layers=80, num_heads=64, '
                   'num_kv_heads=8, embed_dim=8192, max_seq_len=131072, intermediate_dim=28672; '
                   'Llama 3.1 70B HF config in mlc-ai/mlc-llm '
                   'python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "llama3_1_70b": '
                   '"tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu". '
                   'Params: ZHUI/paddlenlp_model_readme @40a7101e89dcf9a0dedb0e0d48c8c357fcc95996'
                   ' (copies of HF model cards) meta-llama/Llama-3.3-70B-Instruct/index.md: "| '
                   'Llama 3.3 (text only) | ... | 70B | Multilingual Text | ... | 128k |"'),
    },
    {
        'key': 'llama4-scout-17b-16e',
        'hf_id': 'meta-llama/Llama-4-Scout-17B-16E',
        'shape': {
                     'name': 'Llama 4 Scout 17B-16E',
                     'layers': 48,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 8,
                     'ffn_hidden': 8192,
                     'vocab': 202048,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 10485760},
        'moe': {
                   'experts': 16,
                   'top_k': 1,
                   'expert_ffn_hidden': 8192,
                   'shared_experts': 1,
                   'dense_layers': 0},
        'extra': {
                     'config_params': 107769861120,
                     'published': '"17B active parameters, 16 experts, 109B total"',
                     'qk_norm': True,
                     'sliding_window': 8192,
                     'sliding_window_pattern': ('chunked local attention (attention_chunk_size '
                                                '8192, non-overlapping chunks, not a true sliding'
                                                ' window) with RoPE on 3 of every 4 layers; every'
                                                ' 4th layer ((i+1)%4==0) is global attention '
                                                'without RoPE (NoPE)'),
                     'config_active_params': 17172894720,
                     'notes': ('HF config.json of the checkpoint itself not found verbatim (it is'
                               ' nested text_config in a multimodal config). qk_norm is a '
                               'weightless L2 norm (no parameters) applied only in RoPE layers. '
                               'computed_params is text decoder only; published 109B includes the'
                               ' vision encoder/projector (~0.7-1B?) -- vision size not verified.'
                               ' No router bias (NeMo: add_bias_linear False; torchtune router '
                               'Linear without bias not separately verified). head_dim 128 given '
                               'explicitly in config but equals hidden/heads.')},
        'source': ('pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/llama4/_model_builders.py llama4_scout_17b_16e: '
                   'llama4_decoder(vocab_size=202_048, num_layers=48, num_heads=40, '
                   'num_kv_heads=8, embed_dim=decoder_embed_dim(=5120), hidden_dim=8192, '
                   'max_seq_len=10485760, rope_base=500_000, norm_eps=1e-5, num_experts=16, '
                   'use_shared_expert=True, skip_rope_interval=4, attention_chunk_size=8192, '
                   'use_scaled_rope=True) [component builder defaults: experts_per_token=1, '
                   'use_qk_norm=True, moe_every_n_layers=None (every layer MoE), q/k/v/o '
                   'bias=False]; AI-Hypercomputer/maxtext src/maxtext/configs/models/ '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8llama4-17b-16e.yml: base_emb_dim: '
                   '5120, base_num_decoder_layers: 48, base_num_query_heads: 40, '
                   'base_num_kv_heads: 8, base_mlp_dim: 8192, base_moe_mlp_dim: 8192, vocab_size:'
                   ' 202048, num_experts: 16, shared_experts: 1, num_experts_per_tok: 1, '
                   'use_qk_norm: true, nope_layer_interval: 4, interleave_moe_layer_step: 1, '
                   'chunk_attn_window_size: 8192, logits_via_embedding: false; NVIDIA/NeMo '
                   'nemo/collections/llm/gpt/model/ '
                   '@8cfedd7203462cb251a914e700e5605444277561llama.py Llama4Config: '
                   'moe_shared_expert_intermediate_size: int = 8192, moe_ffn_hidden_size: int = '
                   '8192, moe_router_topk: int = 1, moe_router_score_function: str = "sigmoid", '
                   'qk_l2_norm: bool = True; Llama4Experts16Config: num_moe_experts: int = 16. '
                   'Params: page https://hackmd.io/%40Ibi/Sy7i4gMRkx "Scout: - parameters: 17B '
                   'active, 16 experts, 109B total" (also IBM watsonx announcement "total '
                   'parameter count 109B, is divided into 16 experts").'),
    },
    {
        'key': 'qwen2.5-0.5b',
        'hf_id': 'Qwen/Qwen2.5-0.5B',
        'shape': {
                     'name': 'Qwen2.5 0.5B',
                     'layers': 24,
                     'hidden': 896,
                     'heads': 14,
                     'kv_heads': 2,
                     'ffn_hidden': 4864,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 32768},
        'moe': None,
        'extra': {
                     'config_params': 494032768,
                     'published': ('"Number of Parameters: 0.49B" / "Number of Paramaters '
                                   '(Non-Embedding): 0.36B"'),
                     'qkv_bias': True,
                     'notes': ('Verbatim HF config seen only for Qwen2-0.5B (mlc-ai/mlc-llm '
                               'python/mlc_llm/model/model_preset.py '
                               '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "qwen2_0_5b", identical'
                               ' shape). head_dim 64.')},
        'source': ('pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2_5/_model_builders.py qwen2_5_0_5b: vocab_size=151936, '
                   'num_layers=24, num_heads=14, num_kv_heads=2, embed_dim=896, '
                   'intermediate_dim=4864, max_seq_len=32768, norm_eps=1e-6, rope_base=1000000.0,'
                   ' tie_word_embeddings=True; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa "Qwen2.5-0.5B{}" (cites HF '
                   'config.json): padded_vocab_size=151936, n_layer=24, n_head=14, n_embd=896, '
                   'n_query_groups=2, intermediate_size=4864, block_size=32768; card: '
                   'ZHUI/paddlenlp_model_readme @40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies'
                   ' of HF model cards) Qwen/Qwen2.5-0.5B/index.md "- Architecture: transformers '
                   'with RoPE, SwiGLU, RMSNorm, Attention QKV bias and tied word embeddings" "- '
                   'Number of Parameters: 0.49B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2/_component_builders.py qwen2(...): "q_proj_bias: bool '
                   '= True, k_proj_bias: bool = True, v_proj_bias: bool = True", output_proj '
                   'bias=False, gate/up/down bias=False; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen2.5 entries: attn_bias=True, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen2.5-1.5b',
        'hf_id': 'Qwen/Qwen2.5-1.5B',
        'shape': {
                     'name': 'Qwen2.5 1.5B',
                     'layers': 28,
                     'hidden': 1536,
                     'heads': 12,
                     'kv_heads': 2,
                     'ffn_hidden': 8960,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 1543714304,
                     'published': ('"Number of Parameters: 1.54B" / "Number of Paramaters '
                                   '(Non-Embedding): 1.31B"'),
                     'qkv_bias': True,
                     'notes': ('Disagreement on context: base config max_position_embeddings '
                               "131072 (torchtune/litgpt) vs model card 'Full 32,768 tokens'; "
                               'Instruct is 32768.')},
        'source': ('pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'qwen2_5_1_5b_base: vocab_size=151936, num_layers=28, num_heads=12, '
                   'num_kv_heads=2, embed_dim=1536, intermediate_dim=8960, max_seq_len=131072, '
                   'tie_word_embeddings=True (qwen2_5_1_5b_instruct: max_seq_len=32768); '
                   'Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa "Qwen2.5-1.5B{}": '
                   'block_size=131072, n_layer=28, n_head=12, n_embd=1536, n_query_groups=2, '
                   'intermediate_size=8960; card: ZHUI/paddlenlp_model_readme '
                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies of HF model cards) '
                   'Qwen/Qwen2.5-1.5B/index.md "- Number of Parameters: 1.54B" "- Context Length:'
                   ' Full 32,768 tokens"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2/_component_builders.py qwen2(...): "q_proj_bias: bool '
                   '= True, k_proj_bias: bool = True, v_proj_bias: bool = True", output_proj '
                   'bias=False, gate/up/down bias=False; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen2.5 entries: attn_bias=True, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen2.5-3b',
        'hf_id': 'Qwen/Qwen2.5-3B',
        'shape': {
                     'name': 'Qwen2.5 3B',
                     'layers': 36,
                     'hidden': 2048,
                     'heads': 16,
                     'kv_heads': 2,
                     'ffn_hidden': 11008,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 32768},
        'moe': None,
        'extra': {
                     'config_params': 3085938688,
                     'published': ('"Number of Parameters: 3.09B" / "Number of Paramaters '
                                   '(Non-Embedding): 2.77B"'),
                     'qkv_bias': True},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen2.5-3B": "hidden_size": 2048, "intermediate_size": 11008, '
                   '"max_position_embeddings": 32768, "num_attention_heads": 16, '
                   '"num_hidden_layers": 36, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, '
                   '"tie_word_embeddings": true, "use_sliding_window": false, "vocab_size": '
                   '151936 (also mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "qwen2.5_3b"); card '
                   'ZHUI/paddlenlp_model_readme @40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies'
                   ' of HF model cards) Qwen/Qwen2.5-3B/index.md "- Number of Parameters: 3.09B";'
                   ' pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2/_component_builders.py qwen2(...): "q_proj_bias: bool '
                   '= True, k_proj_bias: bool = True, v_proj_bias: bool = True", output_proj '
                   'bias=False, gate/up/down bias=False; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen2.5 entries: attn_bias=True, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen2.5-7b',
        'hf_id': 'Qwen/Qwen2.5-7B',
        'shape': {
                     'name': 'Qwen2.5 7B',
                     'layers': 28,
                     'hidden': 3584,
                     'heads': 28,
                     'kv_heads': 4,
                     'ffn_hidden': 18944,
                     'vocab': 152064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 7615616512,
                     'published': ('"Number of Parameters: 7.61B" / "Number of Paramaters '
                                   '(Non-Embedding): 6.53B"'),
                     'qkv_bias': True,
                     'notes': ('Instruct config has max_position_embeddings 32768 (torchtune '
                               'qwen2_5_7b_instruct max_seq_len=32768).')},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen2.5-7B": "hidden_size": 3584, "intermediate_size": 18944, '
                   '"max_position_embeddings": 131072, "num_attention_heads": 28, '
                   '"num_hidden_layers": 28, "num_key_value_heads": 4, "tie_word_embeddings": '
                   'false, "vocab_size": 152064; card ZHUI/paddlenlp_model_readme '
                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies of HF model cards) '
                   'Qwen/Qwen2.5-7B/index.md "- Number of Parameters: 7.61B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2/_component_builders.py qwen2(...): "q_proj_bias: bool '
                   '= True, k_proj_bias: bool = True, v_proj_bias: bool = True", output_proj '
                   'bias=False, gate/up/down bias=False; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen2.5 entries: attn_bias=True, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen2.5-14b',
        'hf_id': 'Qwen/Qwen2.5-14B',
        'shape': {
                     'name': 'Qwen2.5 14B',
                     'layers': 48,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 8,
                     'ffn_hidden': 13824,
                     'vocab': 152064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 14770033664,
                     'published': ('"Number of Parameters: 14.7B" / "Number of Paramaters '
                                   '(Non-Embedding): 13.1B"'),
                     'qkv_bias': True},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen2.5-14B": "hidden_size": 5120, "intermediate_size": 13824, '
                   '"max_position_embeddings": 131072, "num_attention_heads": 40, '
                   '"num_hidden_layers": 48, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, '
                   '"tie_word_embeddings": false, "vocab_size": 152064; card '
                   'ZHUI/paddlenlp_model_readme @40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies'
                   ' of HF model cards) Qwen/Qwen2.5-14B/index.md "- Number of Parameters: '
                   '14.7B"; pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2/_component_builders.py qwen2(...): "q_proj_bias: bool '
                   '= True, k_proj_bias: bool = True, v_proj_bias: bool = True", output_proj '
                   'bias=False, gate/up/down bias=False; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen2.5 entries: attn_bias=True, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen2.5-32b',
        'hf_id': 'Qwen/Qwen2.5-32B',
        'shape': {
                     'name': 'Qwen2.5 32B',
                     'layers': 64,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 8,
                     'ffn_hidden': 27648,
                     'vocab': 152064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 32763876352,
                     'published': ('"Number of Parameters: 32.5B" / "Number of Paramaters '
                                   '(Non-Embedding): 31.0B"'),
                     'qkv_bias': True},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen2.5-32B": "hidden_size": 5120, "intermediate_size": 27648, '
                   '"max_position_embeddings": 131072, "num_attention_heads": 40, '
                   '"num_hidden_layers": 64, "num_key_value_heads": 8, "tie_word_embeddings": '
                   'false, "vocab_size": 152064; card ZHUI/paddlenlp_model_readme '
                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies of HF model cards) '
                   'Qwen/Qwen2.5-32B/index.md "- Number of Parameters: 32.5B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2/_component_builders.py qwen2(...): "q_proj_bias: bool '
                   '= True, k_proj_bias: bool = True, v_proj_bias: bool = True", output_proj '
                   'bias=False, gate/up/down bias=False; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen2.5 entries: attn_bias=True, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen2.5-72b',
        'hf_id': 'Qwen/Qwen2.5-72B',
        'shape': {
                     'name': 'Qwen2.5 72B',
                     'layers': 80,
                     'hidden': 8192,
                     'heads': 64,
                     'kv_heads': 8,
                     'ffn_hidden': 29568,
                     'vocab': 152064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 72706203648,
                     'published': ('"Number of Parameters: 72.7B" / "Number of Paramaters '
                                   '(Non-Embedding): 70.0B"'),
                     'qkv_bias': True,
                     'notes': ('Base checkpoint config not seen verbatim; a '
                               'Qwen2.5-72B-Instruct-style config excerpt (code search, repo '
                               'unnamed) shows "intermediate_size": 29568, "num_key_value_heads":'
                               ' 8, "tie_word_embeddings": false, "max_position_embeddings": '
                               '32768 (Instruct).')},
        'source': ('pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 qwen2_5_72b_base:'
                   ' vocab_size=152064, num_layers=80, num_heads=64, num_kv_heads=8, '
                   'embed_dim=8192, intermediate_dim=29568, max_seq_len=131072, norm_eps=1e-5 '
                   '(tie default False); Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa "Qwen2.5-72B{}": '
                   'padded_vocab_size=152064, n_layer=80, n_head=64, n_embd=8192, '
                   'n_query_groups=8, intermediate_size=29568; card ZHUI/paddlenlp_model_readme '
                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 (copies of HF model cards) '
                   'Qwen/Qwen2.5-72B/index.md "- Number of Parameters: 72.7B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen2/_component_builders.py qwen2(...): "q_proj_bias: bool '
                   '= True, k_proj_bias: bool = True, v_proj_bias: bool = True", output_proj '
                   'bias=False, gate/up/down bias=False; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen2.5 entries: attn_bias=True, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen3-0.6b',
        'hf_id': 'Qwen/Qwen3-0.6B',
        'shape': {
                     'name': 'Qwen3 0.6B',
                     'layers': 28,
                     'hidden': 1024,
                     'heads': 16,
                     'kv_heads': 8,
                     'ffn_hidden': 3072,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 40960},
        'moe': None,
        'extra': {
                     'config_params': 596049920,
                     'published': ('"Number of Parameters: 0.6B" / "Number of Paramaters '
                                   '(Non-Embedding): 0.44B"'),
                     'qk_norm': True,
                     'notes': ('hidden 1024 but heads*head_dim = 2048 (q projection widens). '
                               'max_position_embeddings 40960 in HF config; card says context '
                               '32,768 natively (131,072 with YaRN); torchtune *_base builders '
                               'use 32768. qk-norm = RMSNorm(head_dim) on q and k (2*128 '
                               'weights/layer).')},
        'source': ('HF config copy mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "qwen3_0.6b": "head_dim": 128, '
                   '"hidden_size": 1024, "intermediate_size": 3072, "max_position_embeddings": '
                   '40960, "num_attention_heads": 16, "num_hidden_layers": 28, '
                   '"num_key_value_heads": 8, "attention_bias": False, "tie_word_embeddings": '
                   'True, "vocab_size": 151936; card JoseAdrianRodriguezGonzalez/Llm-Component '
                   '(copies of HF GGUF model cards) QuantFactory__Qwen3-0.6B-GGUF/README.md '
                   '@0dd5e6e92df77b685d591c1a129509feca4ceb79 "- Number of Parameters: 0.6B" "- '
                   'Number of Paramaters (Non-Embedding): 0.44B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen3/_model_builders.py: q_proj_bias=False, q_norm=True '
                   '(k_norm=True), head_dim=128; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen3 entries: bias=False, '
                   'norm_qk=True, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen3-1.7b',
        'hf_id': 'Qwen/Qwen3-1.7B',
        'shape': {
                     'name': 'Qwen3 1.7B',
                     'layers': 28,
                     'hidden': 2048,
                     'heads': 16,
                     'kv_heads': 8,
                     'ffn_hidden': 6144,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 40960},
        'moe': None,
        'extra': {
                     'config_params': 1720574976,
                     'published': ('"Number of Parameters: 1.7B" / "Number of Paramaters '
                                   '(Non-Embedding): 1.4B"'),
                     'qk_norm': True,
                     'notes': ('max_position_embeddings 40960 in HF config; card says context '
                               '32,768 natively (131,072 with YaRN); torchtune *_base builders '
                               'use 32768. qk-norm = RMSNorm(head_dim) on q and k (2*128 '
                               'weights/layer). head_dim 128 given explicitly in config but '
                               'equals hidden/heads.')},
        'source': ('HF config copy mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "qwen3_1.7b": "head_dim": 128, '
                   '"hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": '
                   '40960, "num_attention_heads": 16, "num_hidden_layers": 28, '
                   '"num_key_value_heads": 8, "tie_word_embeddings": True, "vocab_size": 151936; '
                   'card JoseAdrianRodriguezGonzalez/Llm-Component (copies of HF GGUF model '
                   'cards) Qwen__Qwen3-1.7B-GGUF/README.md @0dd5e6e9 "- Number of Parameters: '
                   '1.7B"; pytorch/torchtune @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen3/_model_builders.py: q_proj_bias=False, q_norm=True '
                   '(k_norm=True), head_dim=128; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen3 entries: bias=False, '
                   'norm_qk=True, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen3-4b',
        'hf_id': 'Qwen/Qwen3-4B',
        'shape': {
                     'name': 'Qwen3 4B',
                     'layers': 36,
                     'hidden': 2560,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 9728,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 40960},
        'moe': None,
        'extra': {
                     'config_params': 4022468096,
                     'published': ('"Number of Parameters: 4.0B" / "Number of Paramaters '
                                   '(Non-Embedding): 3.6B"'),
                     'qk_norm': True,
                     'notes': ('heads*head_dim = 4096 > hidden 2560. max_position_embeddings '
                               '40960 in HF config; card says context 32,768 natively (131,072 '
                               'with YaRN); torchtune *_base builders use 32768. qk-norm = '
                               'RMSNorm(head_dim) on q and k (2*128 weights/layer).')},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen3-4B": "head_dim": 128, "hidden_size": 2560, "intermediate_size": 9728, '
                   '"max_position_embeddings": 40960, "num_attention_heads": 32, '
                   '"num_hidden_layers": 36, "num_key_value_heads": 8, "tie_word_embeddings": '
                   'true, "vocab_size": 151936; card JoseAdrianRodriguezGonzalez/Llm-Component '
                   '(copies of HF GGUF model cards) Accepted/unsloth__Qwen3-4B-GGUF/README.md "- '
                   'Number of Parameters: 4.0B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen3/_model_builders.py: q_proj_bias=False, q_norm=True '
                   '(k_norm=True), head_dim=128; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen3 entries: bias=False, '
                   'norm_qk=True, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen3-8b',
        'hf_id': 'Qwen/Qwen3-8B',
        'shape': {
                     'name': 'Qwen3 8B',
                     'layers': 36,
                     'hidden': 4096,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 12288,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 40960},
        'moe': None,
        'extra': {
                     'config_params': 8190735360,
                     'published': ('"Number of Parameters: 8.2B" / "Number of Paramaters '
                                   '(Non-Embedding): 6.95B"'),
                     'qk_norm': True,
                     'notes': ('max_position_embeddings 40960 in HF config; card says context '
                               '32,768 natively (131,072 with YaRN); torchtune *_base builders '
                               'use 32768. qk-norm = RMSNorm(head_dim) on q and k (2*128 '
                               'weights/layer). head_dim 128 given explicitly in config but '
                               'equals hidden/heads.')},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen3-8B": "head_dim": 128, "hidden_size": 4096, "intermediate_size": 12288,'
                   ' "max_position_embeddings": 40960, "num_attention_heads": 32, '
                   '"num_hidden_layers": 36, "num_key_value_heads": 8, "tie_word_embeddings": '
                   'false, "vocab_size": 151936; card JoseAdrianRodriguezGonzalez/Llm-Component '
                   '(copies of HF GGUF model cards) Accepted/unsloth__Qwen3-8B-GGUF/README.md "- '
                   'Number of Parameters: 8.2B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen3/_model_builders.py: q_proj_bias=False, q_norm=True '
                   '(k_norm=True), head_dim=128; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen3 entries: bias=False, '
                   'norm_qk=True, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen3-14b',
        'hf_id': 'Qwen/Qwen3-14B',
        'shape': {
                     'name': 'Qwen3 14B',
                     'layers': 40,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 8,
                     'ffn_hidden': 17408,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 40960},
        'moe': None,
        'extra': {
                     'config_params': 14768307200,
                     'published': ('"Number of Parameters: 14.8B" / "Number of Paramaters '
                                   '(Non-Embedding): 13.2B"'),
                     'qk_norm': True,
                     'notes': ('max_position_embeddings 40960 in HF config; card says context '
                               '32,768 natively (131,072 with YaRN); torchtune *_base builders '
                               'use 32768. qk-norm = RMSNorm(head_dim) on q and k (2*128 '
                               'weights/layer). head_dim 128 given explicitly in config but '
                               'equals hidden/heads.')},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen3-14B": "head_dim": 128, "hidden_size": 5120, "intermediate_size": '
                   '17408, "max_position_embeddings": 40960, "num_attention_heads": 40, '
                   '"num_hidden_layers": 40, "num_key_value_heads": 8, "tie_word_embeddings": '
                   'false, "vocab_size": 151936; card JoseAdrianRodriguezGonzalez/Llm-Component '
                   '(copies of HF GGUF model cards) Qwen__Qwen3-14B-GGUF/README.md @0dd5e6e9 "- '
                   'Number of Parameters: 14.8B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen3/_model_builders.py: q_proj_bias=False, q_norm=True '
                   '(k_norm=True), head_dim=128; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen3 entries: bias=False, '
                   'norm_qk=True, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen3-32b',
        'hf_id': 'Qwen/Qwen3-32B',
        'shape': {
                     'name': 'Qwen3 32B',
                     'layers': 64,
                     'hidden': 5120,
                     'heads': 64,
                     'kv_heads': 8,
                     'ffn_hidden': 25600,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 40960},
        'moe': None,
        'extra': {
                     'config_params': 32762123264,
                     'published': ('"Number of Parameters: 32.8B" / "Number of Paramaters '
                                   '(Non-Embedding): 31.2B"'),
                     'qk_norm': True,
                     'notes': ('heads*head_dim = 8192 > hidden 5120. max_position_embeddings '
                               '40960 in HF config; card says context 32,768 natively (131,072 '
                               'with YaRN); torchtune *_base builders use 32768. qk-norm = '
                               'RMSNorm(head_dim) on q and k (2*128 weights/layer).')},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen3-32B": "head_dim": 128, "hidden_size": 5120, "intermediate_size": '
                   '25600, "max_position_embeddings": 40960, "num_attention_heads": 64, '
                   '"num_hidden_layers": 64, "num_key_value_heads": 8, "tie_word_embeddings": '
                   'false, "vocab_size": 151936; card JoseAdrianRodriguezGonzalez/Llm-Component '
                   '(copies of HF GGUF model cards) Qwen__Qwen3-32B-GGUF/README.md @0dd5e6e9 "- '
                   'Number of Parameters: 32.8B"; pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/qwen3/_model_builders.py: q_proj_bias=False, q_norm=True '
                   '(k_norm=True), head_dim=128; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Qwen3 entries: bias=False, '
                   'norm_qk=True, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP"'),
    },
    {
        'key': 'qwen3-30b-a3b',
        'hf_id': 'Qwen/Qwen3-30B-A3B',
        'shape': {
                     'name': 'Qwen3 30B-A3B',
                     'layers': 48,
                     'hidden': 2048,
                     'heads': 32,
                     'kv_heads': 4,
                     'ffn_hidden': 6144,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 40960},
        'moe': {
                   'experts': 128,
                   'top_k': 8,
                   'expert_ffn_hidden': 768,
                   'shared_experts': 0,
                   'dense_layers': 0},
        'extra': {
                     'config_params': 30532122624,
                     'published': ('"Number of Parameters: 30.5B in total and 3.3B activated" / '
                                   '"Number of Paramaters (Non-Embedding): 29.9B"'),
                     'qk_norm': True,
                     'config_active_params': 3353032704,
                     'notes': ('All 48 layers MoE (decoder_sparse_step 1, mlp_only_layers []); no'
                               ' shared expert; router = Linear(hidden, 128, bias=False) (router '
                               'bias none: Qwen3MoE gate has no bias; not quoted from a file '
                               'here). intermediate_size 6144 is unused by the checkpoint (only '
                               'relevant for mlp_only_layers). ffn_hidden field gives that unused'
                               ' dense size.')},
        'source': ('HF config copy citsjtu2020/LLM-Prof sglang/Model_Config.md '
                   '@8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (verbatim HF config.json copies) '
                   '"Qwen3-30B-A3B": "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": '
                   '2048, "intermediate_size": 6144, "max_position_embeddings": 40960, '
                   '"mlp_only_layers": [], "moe_intermediate_size": 768, "norm_topk_prob": true, '
                   '"num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, '
                   '"num_hidden_layers": 48, "num_key_value_heads": 4, "attention_bias": false, '
                   '"tie_word_embeddings": false, "vocab_size": 151936; Lightning-AI/litgpt '
                   'litgpt/config.py @26857050fe3ff627cd714fe92f5838f51a3d5efa "Qwen3-30B-A3B": '
                   'moe_intermediate_size=768, n_expert=128, n_expert_per_token=8, norm_qk=True; '
                   'card JoseAdrianRodriguezGonzalez/Llm-Component (copies of HF GGUF model '
                   'cards) Qwen__Qwen3-30B-A3B-GGUF/README.md @0dd5e6e9 "- Number of Parameters: '
                   '30.5B in total and 3.3B activated" "- Number of Experts: 128" "- Number of '
                   'Activated Experts: 8"'),
    },
    {
        'key': 'qwen3-235b-a22b',
        'hf_id': 'Qwen/Qwen3-235B-A22B',
        'shape': {
                     'name': 'Qwen3 235B-A22B',
                     'layers': 94,
                     'hidden': 4096,
                     'heads': 64,
                     'kv_heads': 4,
                     'ffn_hidden': 12288,
                     'vocab': 151936,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 40960},
        'moe': {
                   'experts': 128,
                   'top_k': 8,
                   'expert_ffn_hidden': 1536,
                   'shared_experts': 0,
                   'dense_layers': 0},
        'extra': {
                     'config_params': 235093634560,
                     'published': ('"235B in total and 22B activated" (secondary; official card '
                                   'text not found in the index)'),
                     'qk_norm': True,
                     'config_active_params': 22190763520,
                     'notes': ('HF config.json not seen verbatim. All 94 layers MoE, no shared '
                               'expert. maxtext sets rope_max_timescale 5000000 vs litgpt '
                               'rope_base 1000000 (rope theta disagreement; 5e6 likely belongs to'
                               ' the 2507 update, not verified).')},
        'source': ('Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa "Qwen3-235B-A22B" (comment cites '
                   'https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json): '
                   'block_size=40960, head_size=128, padded_vocab_size=151936, n_layer=94, '
                   'n_head=64, n_embd=4096, n_query_groups=4, intermediate_size=12288, '
                   'moe_intermediate_size=1536, norm_qk=True, n_expert=128, n_expert_per_token=8;'
                   ' AI-Hypercomputer/maxtext src/maxtext/configs/models/ '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8qwen3-235b-a22b.yml: base_emb_dim: '
                   '4096, base_num_query_heads: 64, base_num_kv_heads: 4, '
                   'base_num_decoder_layers: 94, head_dim: 128, vocab_size: 151936, use_qk_norm: '
                   'true, num_experts: 128, num_experts_per_tok: 8, base_moe_mlp_dim: 1536, '
                   'norm_topk_prob: true; zyzshishui/slime scripts/models/qwen3-235B-A22B.sh: '
                   '"--untie-embeddings-and-output-weights", "--moe-layer-freq $MOE_LAYER_FREQ" '
                   'with FIRST_K_DENSE_REPLACE=0. Params: barghandan/bytes-and-insights '
                   'content/posts/2025/alibabas-qwen3-235b-a22b-.../index.md "packing a massive '
                   '235 billion parameters, it cleverly activates just 22 billion"'),
    },
    {
        'key': 'gemma2-2b',
        'hf_id': 'google/gemma-2-2b',
        'shape': {
                     'name': 'Gemma 2 2B',
                     'layers': 26,
                     'hidden': 2304,
                     'heads': 8,
                     'kv_heads': 4,
                     'ffn_hidden': 9216,
                     'vocab': 256000,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 256,
                     'max_seq_len': 8192},
        'moe': None,
        'extra': {
                     'config_params': 2614341888,
                     'published': ('"2,024,517,888 non-embedding parameters" (Gemma 2 report, as '
                                   'summarised); total not quoted'),
                     'gated_activation': 'gelu (GeGLU): a gated MLP of three matrices, as SwiGLU',
                     'sliding_window': 4096,
                     'sliding_window_pattern': ('alternating: local sliding-window (4096) on even'
                                                ' layers (0,2,4,...), global on odd layers (1:1)'),
                     'notes': ('heads*head_dim = 2048 < hidden 2304. 4 RMSNorms per layer '
                               '(pre/post attention, pre/post FFN) counted. Embeddings tied '
                               '(Gemma2Config default tie_word_embeddings=True; not stated in the'
                               ' quoted config copies).')},
        'source': ('HF config copy mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "gemma2_2b": "head_dim": 256, '
                   '"hidden_act": "gelu_pytorch_tanh", "hidden_size": 2304, "intermediate_size": '
                   '9216, "max_position_embeddings": 8192, "num_attention_heads": 8, '
                   '"num_hidden_layers": 26, "num_key_value_heads": 4, "query_pre_attn_scalar": '
                   '256, "sliding_window": 4096, "attention_bias": False, "vocab_size": 256000; '
                   'params page https://aili.app/share/4zAAqmDNDHyxQWyJrjAdk4 "The 2B model has '
                   '2,024,517,888 non-embedding parameters, the 9B model has 8,324,201,984, and '
                   'the 27B model has 26,047,480,320."; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Gemma-2 entries: '
                   'norm_class_name="RMSNorm", mlp_class_name="GemmaMLP", '
                   'gelu_approximate="tanh", post_attention_norm=True, post_mlp_norm=True, '
                   'bias=False, "# only layer with idx 0, 2, 4, ... have sliding window '
                   'attention", attention_logit_softcapping=50.0, final_logit_softcapping=30.0'),
    },
    {
        'key': 'gemma2-9b',
        'hf_id': 'google/gemma-2-9b',
        'shape': {
                     'name': 'Gemma 2 9B',
                     'layers': 42,
                     'hidden': 3584,
                     'heads': 16,
                     'kv_heads': 8,
                     'ffn_hidden': 14336,
                     'vocab': 256000,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 256,
                     'max_seq_len': 8192},
        'moe': None,
        'extra': {
                     'config_params': 9241705984,
                     'published': ('"8,324,201,984" non-embedding (Gemma 2 report, as '
                                   'summarised); total not quoted'),
                     'gated_activation': 'gelu (GeGLU): a gated MLP of three matrices, as SwiGLU',
                     'sliding_window': 4096,
                     'sliding_window_pattern': ('alternating: local sliding-window (4096) on even'
                                                ' layers (0,2,4,...), global on odd layers (1:1)'),
                     'notes': ('heads*head_dim = 4096 > hidden 3584. 4 RMSNorms per layer '
                               '(pre/post attention, pre/post FFN) counted. Embeddings tied '
                               '(Gemma2Config default tie_word_embeddings=True; not stated in the'
                               ' quoted config copies).')},
        'source': ('HF config copy mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "gemma2_9b": "head_dim": 256, '
                   '"hidden_size": 3584, "intermediate_size": 14336, "num_attention_heads": 16, '
                   '"num_hidden_layers": 42, "num_key_value_heads": 8, "sliding_window": 4096, '
                   '"vocab_size": 256000, "max_position_embeddings": 8192 (also '
                   'kevinstephano/thunder_model_blocks gemma2_config.py for gemma-2-9b-it); '
                   'params page https://aili.app/share/4zAAqmDNDHyxQWyJrjAdk4; '
                   'Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Gemma-2 entries: '
                   'norm_class_name="RMSNorm", mlp_class_name="GemmaMLP", '
                   'gelu_approximate="tanh", post_attention_norm=True, post_mlp_norm=True, '
                   'bias=False, "# only layer with idx 0, 2, 4, ... have sliding window '
                   'attention", attention_logit_softcapping=50.0, final_logit_softcapping=30.0'),
    },
    {
        'key': 'gemma2-27b',
        'hf_id': 'google/gemma-2-27b',
        'shape': {
                     'name': 'Gemma 2 27B',
                     'layers': 46,
                     'hidden': 4608,
                     'heads': 32,
                     'kv_heads': 16,
                     'ffn_hidden': 36864,
                     'vocab': 256000,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 8192},
        'moe': None,
        'extra': {
                     'config_params': 27227128320,
                     'published': ('"26,047,480,320" non-embedding (Gemma 2 report, as '
                                   'summarised); total not quoted'),
                     'gated_activation': 'gelu (GeGLU): a gated MLP of three matrices, as SwiGLU',
                     'sliding_window': 4096,
                     'sliding_window_pattern': ('alternating: local sliding-window (4096) on even'
                                                ' layers (0,2,4,...), global on odd layers (1:1)'),
                     'notes': ('query_pre_attn_scalar 144 (=4608/32) rather than head_dim. 4 '
                               'RMSNorms per layer (pre/post attention, pre/post FFN) counted. '
                               'Embeddings tied (Gemma2Config default tie_word_embeddings=True; '
                               'not stated in the quoted config copies).')},
        'source': ('HF config copy mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "gemma2_27b": "head_dim": 128, '
                   '"hidden_size": 4608, "intermediate_size": 36864, "num_attention_heads": 32, '
                   '"num_hidden_layers": 46, "num_key_value_heads": 16, "query_pre_attn_scalar": '
                   '144, "sliding_window": 4096, "vocab_size": 256000; params page '
                   'https://aili.app/share/4zAAqmDNDHyxQWyJrjAdk4; Lightning-AI/litgpt '
                   'litgpt/config.py @26857050fe3ff627cd714fe92f5838f51a3d5efa Gemma-2 entries: '
                   'norm_class_name="RMSNorm", mlp_class_name="GemmaMLP", '
                   'gelu_approximate="tanh", post_attention_norm=True, post_mlp_norm=True, '
                   'bias=False, "# only layer with idx 0, 2, 4, ... have sliding window '
                   'attention", attention_logit_softcapping=50.0, final_logit_softcapping=30.0'),
    },
    {
        'key': 'gemma3-1b',
        'hf_id': 'google/gemma-3-1b-it',
        'shape': {
                     'name': 'Gemma 3 1B',
                     'layers': 26,
                     'hidden': 1152,
                     'heads': 4,
                     'kv_heads': 1,
                     'ffn_hidden': 6912,
                     'vocab': 262144,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 256,
                     'max_seq_len': 32768},
        'moe': None,
        'extra': {
                     'config_params': 999885952,
                     'published': ('"1 billion" (HF launch blog: "four sizes, 1 billion, 4 '
                                   'billion, 12 billion, and 27 billion parameters")'),
                     'gated_activation': 'gelu (GeGLU): a gated MLP of three matrices, as SwiGLU',
                     'qk_norm': True,
                     'sliding_window': 512,
                     'sliding_window_pattern': ('5 local (sliding window 512) : 1 global; layers '
                                                'with (i+1)%6==0 are global '
                                                '(sliding_window_pattern 6); local RoPE base 10k,'
                                                ' global 1M'),
                     'notes': ('Disagreement: litgpt Gemma-3-1b-it block_size=131072 vs HF config'
                               ' max_position_embeddings 32768 (blog: 32k context for 1B). 4 '
                               'RMSNorms per layer + q/k RMSNorm(head_dim) counted.')},
        'source': ('HF config copy mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py '
                   '@79d603f085f50500e9509fa01785ffa7ecfaaa93 "gemma3_1b_it": "head_dim": 256, '
                   '"hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, '
                   '"intermediate_size": 6912, "max_position_embeddings": 32768, '
                   '"num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1, '
                   '"sliding_window": 512, "sliding_window_pattern": 6, "vocab_size": 262144, '
                   '"attention_bias": False; params page '
                   'https://vuink.com/post/uhttvatsnpr-d-dpb/blog/gemma3 (mirror of HF blog); '
                   'Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Gemma-3 entries: norm_qk=True, '
                   'post_attention_norm=True, post_mlp_norm=True, mlp_class_name="GemmaMLP", '
                   'gelu_approximate="tanh", "# 5 local layers for every global layer" '
                   'sliding_window_indices=[0 if (i + 1) % 6 == 0 else 1 ...]'),
    },
    {
        'key': 'gemma3-4b',
        'hf_id': 'google/gemma-3-4b-it',
        'shape': {
                     'name': 'Gemma 3 4B',
                     'layers': 34,
                     'hidden': 2560,
                     'heads': 8,
                     'kv_heads': 4,
                     'ffn_hidden': 10240,
                     'vocab': 262144,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 256,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 3880099328,
                     'published': '"4 billion" (HF launch blog)',
                     'gated_activation': 'gelu (GeGLU): a gated MLP of three matrices, as SwiGLU',
                     'qk_norm': True,
                     'sliding_window': 1024,
                     'sliding_window_pattern': ('5 local (sliding window 1024) : 1 global; layers'
                                                ' with (i+1)%6==0 are global '
                                                '(sliding_window_pattern 6); local RoPE base 10k,'
                                                ' global 1M'),
                     'notes': ('Checkpoint is multimodal (Gemma3ForConditionalGeneration); '
                               'text_config vocab in the HF checkpoint is 262208 (see '
                               'gemma3-12b/27b evidence) vs 262144 in litgpt/maxtext; 64-row '
                               'difference is negligible. computed excludes the ~417M SigLIP '
                               "vision tower (size not verified here), so published '4B' > "
                               'computed. 4 RMSNorms per layer + q/k RMSNorm(head_dim) counted.')},
        'source': ('Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa "Gemma-3-4b-it" (cites HF '
                   'config.json): vocab_size=262144, block_size=131072, sliding_window_size=1024,'
                   ' intermediate_size=10240, n_embd=2560, n_layer=34, n_head=8, '
                   'n_query_groups=4, head_size=256, rope_adjustments=dict(factor=8.0); '
                   'AI-Hypercomputer/maxtext src/maxtext/configs/models/ '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8gemma3-4b.yml: '
                   'base_num_decoder_layers: 34, base_emb_dim: 2560, base_num_query_heads: 8, '
                   'base_num_kv_heads: 4, base_mlp_dim: 10240, head_dim: 256, vocab_size: '
                   '262_144, logits_via_embedding: true, sliding_window_size: 1024; '
                   'Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Gemma-3 entries: norm_qk=True, '
                   'post_attention_norm=True, post_mlp_norm=True, mlp_class_name="GemmaMLP", '
                   'gelu_approximate="tanh", "# 5 local layers for every global layer" '
                   'sliding_window_indices=[0 if (i + 1) % 6 == 0 else 1 ...]'),
    },
    {
        'key': 'gemma3-12b',
        'hf_id': 'google/gemma-3-12b-it',
        'shape': {
                     'name': 'Gemma 3 12B',
                     'layers': 48,
                     'hidden': 3840,
                     'heads': 16,
                     'kv_heads': 8,
                     'ffn_hidden': 15360,
                     'vocab': 262208,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 256,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 11766034176,
                     'published': '"12 billion" (HF launch blog)',
                     'gated_activation': 'gelu (GeGLU): a gated MLP of three matrices, as SwiGLU',
                     'qk_norm': True,
                     'sliding_window': 1024,
                     'sliding_window_pattern': ('5 local (sliding window 1024) : 1 global; layers'
                                                ' with (i+1)%6==0 are global '
                                                '(sliding_window_pattern 6); local RoPE base 10k,'
                                                ' global 1M'),
                     'notes': ('vocab: 262208 in HF-derived config (verl) vs 262144 in '
                               'litgpt/maxtext. Multimodal checkpoint; computed excludes vision '
                               'tower. 4 RMSNorms per layer + q/k RMSNorm(head_dim) counted.')},
        'source': ('volcengine/verl tests/utils/test_flops_counter.py '
                   '@b178a3cd56f58b2d502255daba591e92833930a7: "config": {  # '
                   'Gemma3-12B-IT-TextOnly "model_type": "gemma3_text", "vocab_size": 262208, '
                   '"hidden_size": 3840, "intermediate_size": 15360, "num_hidden_layers": 48, '
                   '"num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, '
                   '"sliding_window": 1024, "sliding_window_pattern": 6; Lightning-AI/litgpt '
                   'litgpt/config.py @26857050fe3ff627cd714fe92f5838f51a3d5efa "Gemma-3-12b-it": '
                   'vocab_size=262144, n_layer=48, n_embd=3840, n_head=16, n_query_groups=8, '
                   'head_size=256, intermediate_size=15360; AI-Hypercomputer/maxtext '
                   'src/maxtext/configs/models/ '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8gemma3-12b.yml same shape, '
                   'vocab_size: 262_144; Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa Gemma-3 entries: norm_qk=True, '
                   'post_attention_norm=True, post_mlp_norm=True, mlp_class_name="GemmaMLP", '
                   'gelu_approximate="tanh", "# 5 local layers for every global layer" '
                   'sliding_window_indices=[0 if (i + 1) % 6 == 0 else 1 ...]'),
    },
    {
        'key': 'gemma3-27b',
        'hf_id': 'google/gemma-3-27b-it',
        'shape': {
                     'name': 'Gemma 3 27B',
                     'layers': 62,
                     'hidden': 5376,
                     'heads': 32,
                     'kv_heads': 16,
                     'ffn_hidden': 21504,
                     'vocab': 262208,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 27009346304,
                     'published': '"27 billion" (HF launch blog)',
                     'gated_activation': 'gelu (GeGLU): a gated MLP of three matrices, as SwiGLU',
                     'qk_norm': True,
                     'sliding_window': 1024,
                     'sliding_window_pattern': ('5 local (sliding window 1024) : 1 global; layers'
                                                ' with (i+1)%6==0 are global '
                                                '(sliding_window_pattern 6); local RoPE base 10k,'
                                                ' global 1M'),
                     'notes': ('vocab 262208 in the HF checkpoint (module print) vs 262144 '
                               'litgpt/maxtext. Query scale uses query_pre_attn_scalar 168 '
                               '(=5376/32). heads*head_dim 4096 < hidden 5376. computed excludes '
                               'vision tower. 4 RMSNorms per layer + q/k RMSNorm(head_dim) '
                               'counted.')},
        'source': ('Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa "Gemma-3-27b-it": '
                   'attention_scores_scalar=168, vocab_size=262144, sliding_window_size=1024, '
                   'intermediate_size=21504, n_embd=5376, n_layer=62, n_head=32, '
                   'n_query_groups=16, head_size=128; AI-Hypercomputer/maxtext '
                   'src/maxtext/configs/models/ '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8gemma3-27b.yml: '
                   'base_num_decoder_layers: 62, base_emb_dim: 5376, base_num_query_heads: 32, '
                   'base_num_kv_heads: 16, base_mlp_dim: 21504, head_dim: 128; module print of '
                   'the HF checkpoint on page '
                   'https://sarghydesign.ro/gemma-explained-whats-new-in-gemma-3: '
                   '"(embed_tokens): Gemma3TextScaledWordEmbedding(262208, 5376, padding_idx=0)" '
                   '"(q_proj): Linear(in_features=5376, out_features=4096, bias=False)" '
                   '"(k_proj): Linear(in_features=5376, out_features=2048, bias=False)" '
                   '"(q_norm): Gemma3RMSNorm((128,), eps=1e-06)"; Lightning-AI/litgpt '
                   'litgpt/config.py @26857050fe3ff627cd714fe92f5838f51a3d5efa Gemma-3 entries: '
                   'norm_qk=True, post_attention_norm=True, post_mlp_norm=True, '
                   'mlp_class_name="GemmaMLP", gelu_approximate="tanh", "# 5 local layers for '
                   'every global layer" sliding_window_indices=[0 if (i + 1) % 6 == 0 else 1 ...]'),
    },
    {
        'key': 'mistral-nemo-12b',
        'hf_id': 'mistralai/Mistral-Nemo-Base-2407',
        'shape': {
                     'name': 'Mistral-Nemo 12B (2407)',
                     'layers': 40,
                     'hidden': 5120,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 14336,
                     'vocab': 131072,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 128000},
        'moe': None,
        'extra': {
                     'config_params': 12247782400,
                     'published': ('"12B" (name; card links "nvidia/Mistral-NeMo-12B-Instruct"); '
                                   'exact count not stated'),
                     'notes': ('Model card says Hidden dim 14,436 -- a typo vs config 14336. NeMo'
                               ' comment mentions max_position_embeddings 1024000 (Instruct '
                               'config at some revision) vs 128000 in Base config. heads*head_dim'
                               ' = 4096 < hidden 5120.')},
        'source': ('HF config verbatim kevinstephano/thunder_model_blocks '
                   'thunder_model_blocks/mistral/mistral_config.py '
                   '@5c083b0e1fc8c408308c6b602bfd4669a36a2901 (verbatim HF config of '
                   'mistralai/Mistral-Nemo-Base-2407): "head_dim": 128, "hidden_act": "silu", '
                   '"hidden_size": 5120, "intermediate_size": 14336, "max_position_embeddings": '
                   '128000, "num_attention_heads": 32, "num_hidden_layers": 40, '
                   '"num_key_value_heads": 8, "rope_theta": 1000000.0, "sliding_window": null, '
                   '"tie_word_embeddings": false, "vocab_size": 131072; NVIDIA/NeMo '
                   'nemo/collections/llm/gpt/model/ '
                   '@8cfedd7203462cb251a914e700e5605444277561mistral.py MistralNeMoConfig12B: '
                   'num_layers 40, hidden_size 5120, kv_channels 128, seq_length 4096 "# but   '
                   '\\"max_position_embeddings\\": 1024000,"; card copy YinanWusoymilk/hf-readme tr'
                   'aining_and_application/readme_files/QuantFactory_Mistral-Nemo-Instruct-2407-G'
                   'GUF.md @eb4de03f: "- **Layers:** 40" "- **Dim:** 5,120" "- **Head dim:** 128"'
                   ' "- **Hidden dim:** 14,436" "- Trained with a **128k context window**"'),
    },
    {
        'key': 'mistral-small-24b',
        'hf_id': 'mistralai/Mistral-Small-24B-Base-2501',
        'shape': {
                     'name': 'Mistral Small 3 24B (2501)',
                     'layers': 40,
                     'hidden': 5120,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 32768,
                     'vocab': 131072,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'head_dim': 128,
                     'max_seq_len': 32768},
        'moe': None,
        'extra': {
                     'config_params': 23572403200,
                     'published': '"boasting 24B parameters"',
                     'notes': ('Full HF config.json (tie flag, max_position_embeddings, '
                               'rope_theta) not seen verbatim; untied and 32k from NIM '
                               "card/Mistral convention (verl's FLOPs comment uses "
                               'vocab*hidden*2, i.e. untied). The 3.1 successor '
                               '(Mistral3ForConditionalGeneration) has max_position_embeddings '
                               '131072, rope_theta 1e9 -- do not confuse.')},
        'source': ('volcengine/verl tests/utils/test_flops_counter.py '
                   '@b178a3cd56f58b2d502255daba591e92833930a7: "mistral": { "config": {  # '
                   'mistralai/Mistral-Small-24B-Instruct-2501 "model_type": "mistral", '
                   '"vocab_size": 131072, "hidden_size": 5120, "intermediate_size": 32768, '
                   '"num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,'
                   ' "head_dim": 128; NVIDIA NIM page https://docs.api.nvidia.com/nim/reference/m'
                   'istralai-mistral-small-24b-instruct: "boasting 24B parameters", "Context '
                   'Window: A 32k context window.", "Tokenizer: Utilizes a Tekken tokenizer with '
                   'a 131k vocabulary size.", "- Layers: 40 - Dim: 5,120 - Head dim: 128 - Hidden'
                   ' dim: 32,768"'),
    },
    {
        'key': 'mixtral-8x22b',
        'hf_id': 'mistralai/Mixtral-8x22B-v0.1',
        'shape': {
                     'name': 'Mixtral 8x22B v0.1',
                     'layers': 56,
                     'hidden': 6144,
                     'heads': 48,
                     'kv_heads': 8,
                     'ffn_hidden': 16384,
                     'vocab': 32768,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 65536},
        'moe': {
                   'experts': 8,
                   'top_k': 2,
                   'expert_ffn_hidden': 16384,
                   'shared_experts': 0,
                   'dense_layers': 0},
        'extra': {
                     'config_params': 140630071296,
                     'published': '"39B active parameters out of 141B total"',
                     'config_active_params': 39161468928,
                     'notes': ('vocab 32768 is from Instruct config (litgpt) and maxtext; the '
                               'base v0.1 HF config.json was not found verbatim and may differ '
                               '(base tokenizer) -- unverified. Router = Linear(hidden, 8, '
                               'bias=False) in HF Mixtral (not quoted here). Every layer MoE, no '
                               'shared expert. A third-party card copy (MaziyarPanahi GGUF) says '
                               "'141B MoE with ~35B active'. head_dim 128 given explicitly in "
                               'config but equals hidden/heads.')},
        'source': ('Lightning-AI/litgpt litgpt/config.py '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa (comment "# https://huggingface.co/'
                   'mistralai/Mixtral-8x22B-Instruct-v0.1/blob/main/config.json"): '
                   'padded_vocab_size=32768, block_size=65536, n_layer=56, n_query_groups=8, '
                   'bias=False, norm_class_name="RMSNorm", mlp_class_name="LLaMAMoE", '
                   'intermediate_size=16384, n_head=48, n_embd=6144, rope_base=1000000, '
                   'n_expert=8, n_expert_per_token=2; AI-Hypercomputer/maxtext '
                   'src/maxtext/configs/models/ '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8mixtral-8x22b.yml: base_emb_dim: '
                   '6144, base_num_query_heads: 48, base_num_kv_heads: 8, base_mlp_dim: 16384, '
                   'base_moe_mlp_dim: 16384, base_num_decoder_layers: 56, head_dim: 128, '
                   'vocab_size: 32768, num_experts: 8, num_experts_per_tok: 2, '
                   'logits_via_embedding: false; NVIDIA/NeMo nemo/collections/llm/gpt/model/ '
                   '@8cfedd7203462cb251a914e700e5605444277561mixtral.py MixtralConfig8x22B: '
                   'num_layers 56, hidden_size 6144, num_attention_heads 48, ffn_hidden_size '
                   '16384; params BudEcosystem/bud-connect '
                   'scripts/model_docs_workflow/raw_docs/mistral/open-mixtral-8x22b.md: "it uses '
                   'only 39B active parameters out of 141B total"'),
    },
    {
        'key': 'phi-3-mini',
        'hf_id': 'microsoft/Phi-3-mini-4k-instruct',
        'shape': {
                     'name': 'Phi-3 mini (3.8B, 4k)',
                     'layers': 32,
                     'hidden': 3072,
                     'heads': 32,
                     'kv_heads': 32,
                     'ffn_hidden': 8192,
                     'vocab': 32064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 4096},
        'moe': None,
        'extra': {
                     'config_params': 3821079552,
                     'published': ('"The Phi-3-Mini-128K-Instruct is a 3.8 billion-parameter, '
                                   'lightweight, state-of-the-art open model" / "Phi-3 '
                                   'Mini-128K-Instruct has 3.8B parameters" (card of the 128k '
                                   'sibling, same weights shape); keras-hub preset '
                                   'phi3_mini_4k_instruct_en: "params": 3821079552'),
                     'sliding_window': 2047,
                     'sliding_window_pattern': ('config sets sliding_window=2047 (applies to '
                                                'every layer in HF Phi3 attention; context is '
                                                '4096). litgpt uses 2048.'),
                     'notes': ('Fused qkv_proj and gate_up_proj in the HF checkpoint (same '
                               'parameter count). sliding_window disagreement: HF config 2047 vs '
                               'litgpt 2048.')},
        'source': ('scaleapi/llm-engine @a82369619a365b79a45e49ef6af1045653102615 '
                   "model-engine/tests/unit/domain/test_llm_use_cases.py L3046-3073: '# Phi 3 "
                   'mini from https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/main/c'
                   'onfig.json\' "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": '
                   '8192, "max_position_embeddings": 4096, "num_attention_heads": 32, '
                   '"num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05, '
                   '"sliding_window": 2047, "tie_word_embeddings": False, "attention_bias": '
                   'False, "vocab_size": 32064. Cross-check: Lightning-AI/litgpt '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa litgpt/config.py L1816-1830 '
                   "('vocab_size=32000, padded_vocab_size=32064, block_size=4096, n_embd=3072, "
                   "n_layer=32, intermediate_size=8192, sliding_window_size=2048'); "
                   'pytorch/torchtune @bd2a0fc7 torchtune/models/phi3/_model_builders.py '
                   'phi3_mini(): vocab_size=32_064, num_layers=32, num_heads=32, num_kv_heads=32,'
                   ' embed_dim=3072, intermediate_dim=8192, max_seq_len=4096. Card: '
                   'asgaardlab/model-card-reorganization @d31e549a verified_model_cards/microsoft'
                   '@Phi-3-mini-128k-instruct/2_original_model_card.md L6, L210. keras-hub: '
                   'keras-team/keras-hub @71453d08f59edc90d276e999319fc51e61cbf82c '
                   'keras_hub/src/models/phi3/phi3_presets.py L14.'),
    },
    {
        'key': 'phi-3-medium',
        'hf_id': 'microsoft/Phi-3-medium-4k-instruct',
        'shape': {
                     'name': 'Phi-3 medium (14B, 4k)',
                     'layers': 40,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 10,
                     'ffn_hidden': 17920,
                     'vocab': 32064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 4096},
        'moe': None,
        'extra': {
                     'config_params': 13960238080,
                     'published': ('"The Phi-3-Medium-128K-Instruct is a 14B parameters, '
                                   'lightweight, state-of-the-art open model"; '
                                   '"Phi-3-Medium-128k-Instruct has 14B parameters and is a dense'
                                   ' decoder-only Transformer model" (card copy in '
                                   'ttlmtang123/Phi-3-medium-128k-instruct README.md @833d18fe)'),
                     'sliding_window': 2047,
                     'sliding_window_pattern': ('config sliding_window=2047 on all layers (4k '
                                                'variant)'),
                     'notes': ('Config in llm-engine test is the 4k-context Phi-3-medium config '
                               '(max_position_embeddings 4096, transformers 4.39.3); the 128k '
                               'variant differs only in rope scaling / max_position_embeddings '
                               '(not verified here).')},
        'source': ('scaleapi/llm-engine @a82369619a365b79a45e49ef6af1045653102615 '
                   'model-engine/tests/unit/domain/test_llm_use_cases.py L3157-3184 (config used '
                   "for 'phi-3-medium-8k-instruct' test; not labelled with its HF URL): "
                   '"hidden_size": 5120, "intermediate_size": 17920, "max_position_embeddings": '
                   '4096, "model_type": "phi3", "num_attention_heads": 40, "num_hidden_layers": '
                   '40, "num_key_value_heads": 10, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, '
                   '"sliding_window": 2047, "tie_word_embeddings": False, "attention_bias": '
                   'False, "vocab_size": 32064. A second, unattributed copy (search-index file id'
                   ' 62556928605) agrees: \'"phi-3-medium": {"num_hidden_layers": 40, '
                   '"vocab_size": 32064, "hidden_size": 5120, "intermediate_size": 17920, '
                   '"max_position_embeddings": 4096, ... "num_attention_heads": 40, '
                   '"num_key_value_heads": 10}\'.'),
    },
    {
        'key': 'phi-4',
        'hf_id': 'microsoft/phi-4',
        'shape': {
                     'name': 'Phi-4 (14B)',
                     'layers': 40,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 10,
                     'ffn_hidden': 17920,
                     'vocab': 100352,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 16384},
        'moe': None,
        'extra': {
                     'config_params': 14659507200,
                     'published': ('"Phi‑4 is described in Microsoft\'s technical report as a '
                                   '14B‑parameter, dense decoder‑only transformer" '
                                   '(https://drose.io/aitools/tools/microsoft-phi-4); "Total '
                                   'params 14.7B" (https://fitmygpu.com/models/phi-4-14b)'),
                     'notes': ('tie_word_embeddings not quoted from the HF config itself; untied '
                               'is inferred from litgpt/torchtune (separate output projection) '
                               'and from the published 14.7B total, which only the untied count '
                               'reproduces (tied would be 14.15B).')},
        'source': ('Lightning-AI/litgpt @26857050fe3ff627cd714fe92f5838f51a3d5efa '
                   "litgpt/config.py L1866-1883: '# "
                   'https://huggingface.co/microsoft/phi-4/blob/main/config.json\' name="phi-4", '
                   'vocab_size=100352, padded_vocab_size=100352, block_size=16384, n_embd=5120, '
                   'n_layer=40, n_head=40, n_query_groups=10, bias=False, '
                   'norm_class_name="RMSNorm", intermediate_size=17920, rope_base=250000, '
                   'mlp_class_name="LLaMAMLP". Cross-check pytorch/torchtune '
                   '@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 '
                   'torchtune/models/phi4/_model_builders.py L20-36 phi4_14b(): '
                   'vocab_size=100_352, num_layers=40, num_heads=40, num_kv_heads=10, '
                   'embed_dim=5120, intermediate_dim=17920, max_seq_len=16384, norm_eps=1e-5.'),
    },
    {
        'key': 'phi-4-mini',
        'hf_id': 'microsoft/Phi-4-mini-instruct',
        'shape': {
                     'name': 'Phi-4-mini (3.8B)',
                     'layers': 32,
                     'hidden': 3072,
                     'heads': 24,
                     'kv_heads': 8,
                     'ffn_hidden': 8192,
                     'vocab': 200064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 3836021760,
                     'published': ('"Phi-4-mini Instruct (3.8B) is a newly released version of '
                                   'the popular Phi-4 model developed by Microsoft." '
                                   '(pytorch/executorch @cff6f4dd32e630945b7188512c1f2b4f102b05ad'
                                   ' examples/models/phi_4_mini/README.md)'),
                     'sliding_window': 262144,
                     'sliding_window_pattern': ('config sliding_window=262144 > '
                                                'max_position_embeddings, i.e. effectively full '
                                                'attention on all layers; partial_rotary_factor '
                                                '0.75 (LongRoPE)'),
                     'notes': ('mlc-llm names this preset "phi-4" but the embedded config is '
                               'Phi-4-mini-instruct. head_dim = 3072/24 = 128.')},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L782-923 preset "phi-4" (its '
                   '"_name_or_path": "Phi-4-mini-instruct"): "architectures": '
                   '["Phi3ForCausalLM"], "attention_bias": False, "hidden_act": "silu", '
                   '"hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": '
                   '131072, "mlp_bias": False, "num_attention_heads": 24, "num_hidden_layers": '
                   '32, "num_key_value_heads": 8, "partial_rotary_factor": 0.75, "rms_norm_eps": '
                   '1e-05, "sliding_window": 262144, "tie_word_embeddings": True, "vocab_size": '
                   '200064. Cross-check pytorch/executorch '
                   '@cff6f4dd32e630945b7188512c1f2b4f102b05ad '
                   'examples/models/phi_4_mini/config/config.json: "dim": 3072, "hidden_dim": '
                   '8192, "n_heads": 24, "n_kv_heads": 8, "n_layers": 32, "vocab_size": 200064, '
                   '"partial_rotary_factor": 0.75, "max_position_embeddings": 131072; '
                   'Lightning-AI/litgpt @26857050fe3ff627cd714fe92f5838f51a3d5efa '
                   'litgpt/config.py L1923-1940 (n_head=24, n_query_groups=8, '
                   'padded_vocab_size=200064, rotary_percentage=0.75).'),
    },
    {
        'key': 'deepseek-v2-lite',
        'hf_id': 'deepseek-ai/DeepSeek-V2-Lite',
        'shape': {
                     'name': 'DeepSeek-V2-Lite (16B MoE, MLA)',
                     'layers': 27,
                     'hidden': 2048,
                     'heads': 16,
                     'kv_heads': 16,
                     'ffn_hidden': 10944,
                     'vocab': 102400,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 163840,
                     'q_lora_rank': 0,
                     'kv_lora_rank': 512,
                     'qk_rope_head_dim': 64,
                     'qk_nope_head_dim': 128,
                     'v_head_dim': 128},
        'moe': {
                   'experts': 64,
                   'top_k': 6,
                   'expert_ffn_hidden': 1408,
                   'shared_experts': 2,
                   'dense_layers': 1},
        'extra': {
                     'config_params': 15706484224,
                     'published': ('"16B total params, 2.4B active params"; "DeepSeek-V2-Lite '
                                   'comprises 15.7B total parameters, of which 2.4B are activated'
                                   ' for each token." (ZHUI/paddlenlp_model_readme '
                                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 '
                                   'deepseek-ai/DeepSeek-V2-Lite/index.md L70, L147, copy of the '
                                   'HF card)'),
                     'config_active_params': 2661150208,
                     'notes': ('head_dim given as q/k head dim = qk_nope 128 + qk_rope 64 = 192; '
                               'v_head_dim 128. max_position_embeddings 163840 via YaRN (factor '
                               '40, original 4096); card lists 32k context. Param formula uses '
                               'MLA shapes: q_proj h x H*192, kv_a_proj_with_mqa h x (512+64), '
                               'kv_a_layernorm 512, kv_b_proj 512 x H*(128+128), o_proj H*128 x '
                               "h. Computed active params 2,661,150,208 vs card '2.4B activated' "
                               '(card figure likely excludes the input embedding).')},
        'source': ('AI-Hypercomputer/maxtext @e591f30cbbf217ed67ef71263ec0538239f9c3b8 '
                   'src/maxtext/checkpoint_conversion/utils/hf_model_configs.py L833-890 '
                   'deepseek2_16b_dict: "first_k_dense_replace": 1, "hidden_size": 2048, '
                   '"intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": '
                   '163840, "moe_intermediate_size": 1408, "moe_layer_freq": 1, '
                   '"n_routed_experts": 64, "n_shared_experts": 2, "num_attention_heads": 16, '
                   '"num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,'
                   ' "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, '
                   '"scoring_func": "softmax", "tie_word_embeddings": False, "topk_method": '
                   '"greedy", "v_head_dim": 128, "vocab_size": 102400. Same values in '
                   'mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L1015-1061 "deepseek_v2_lite". Card text'
                   ' (ZHUI/paddlenlp_model_readme @40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 '
                   'L147): "DeepSeek-V2-Lite has 27 layers and a hidden dimension of 2048. It '
                   'also employs MLA and has 16 attention heads, where each head has a dimension '
                   'of 128. Its KV compression dimension is 512, ... it does not compress the '
                   'queries. For the decoupled queries and key, it has a per-head dimension of '
                   '64. ... all FFNs except for the first layer are replaced with MoE layers. '
                   'Each MoE layer consists of 2 shared experts and 64 routed experts, where the '
                   'intermediate hidden dimension of each expert is 1408. Among the routed '
                   'experts, 6 experts will be activated for each token."'),
    },
    {
        'key': 'deepseek-r1-distill-qwen-7b',
        'hf_id': 'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B',
        'shape': {
                     'name': 'DeepSeek-R1-Distill-Qwen-7B',
                     'layers': 28,
                     'hidden': 3584,
                     'heads': 28,
                     'kv_heads': 4,
                     'ffn_hidden': 18944,
                     'vocab': 152064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 7615616512,
                     'published': ('No count in the card beyond the name; card table: '
                                   '"DeepSeek-R1-Distill-Qwen-7B | Qwen2.5-Math-7B" '
                                   '(ZHUI/paddlenlp_model_readme '
                                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 '
                                   'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B/index.md L114). '
                                   'Treated as "7B".'),
                     'qkv_bias': True,
                     'notes': ('Qwen2 architecture: q/k/v projections have bias, o_proj no bias. '
                               'rope_theta 10000 (inherited from Qwen2.5-Math-7B) differs from '
                               'Qwen2.5-7B (1e6). Config source is not attributable to a '
                               'repository: verify against the HF config before relying on '
                               'rope/max_position values.')},
        'source': ('Config copy in an unidentified GitHub markdown file (search-index file id '
                   "44995554883; repository not resolvable with the tools; introduced as 'with "
                   'this config:\' next to deep_seek_verify.py): "architectures": '
                   '["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944, '
                   '"max_position_embeddings": 131072, "max_window_layers": 28, '
                   '"num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,'
                   ' "rms_norm_eps": 1e-06, "rope_theta": 10000, "sliding_window": 4096, '
                   '"tie_word_embeddings": false, "transformers_version": "4.44.0", '
                   '"use_sliding_window": false, "vocab_size": 152064. Shape cross-check with the'
                   ' Qwen2.5-7B base in AI-Hypercomputer/maxtext '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8 '
                   'src/maxtext/checkpoint_conversion/utils/hf_model_configs.py L487-503 '
                   'qwen25_7b_config: vocab_size=152064, hidden_size=3584, '
                   'intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, '
                   'num_key_value_heads=4, tie_word_embeddings=False, attention_bias=True.'),
    },
    {
        'key': 'deepseek-r1-distill-qwen-14b',
        'hf_id': 'deepseek-ai/DeepSeek-R1-Distill-Qwen-14B',
        'shape': {
                     'name': 'DeepSeek-R1-Distill-Qwen-14B',
                     'layers': 48,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 8,
                     'ffn_hidden': 13824,
                     'vocab': 152064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 14770033664,
                     'published': ('Card table: "DeepSeek-R1-Distill-Qwen-14B | Qwen2.5-14B" '
                                   '(ZHUI/paddlenlp_model_readme '
                                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 '
                                   'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B/index.md L116). '
                                   'Treated as "14B".'),
                     'qkv_bias': True,
                     'notes': ("max_position_embeddings: maxtext's converter config says 32768, "
                               'the HF Qwen2.5-14B config copy says 131072; the sibling '
                               'Distill-Qwen-32B config (verified) uses 131072, so 131072 is used'
                               " here. Verify against the distill checkpoint's config.")},
        'source': ("Distill checkpoint's own config.json NOT found. Shapes from its base model "
                   'Qwen2.5-14B: AI-Hypercomputer/maxtext '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8 '
                   'src/maxtext/checkpoint_conversion/utils/hf_model_configs.py L505-520 '
                   'qwen25_14b_config: vocab_size=152064, hidden_size=5120, '
                   'intermediate_size=13824, num_hidden_layers=48, num_attention_heads=40, '
                   'num_key_value_heads=8, max_position_embeddings=32768, rope_theta=1000000.0, '
                   'tie_word_embeddings=False, attention_bias=True. Unattributed copy of the '
                   'Qwen2.5-14B HF config (search-index file id 30247352769): "hidden_size": '
                   '5120, "intermediate_size": 13824, "max_position_embeddings": 131072, '
                   '"max_window_layers": 48, "num_attention_heads": 40, "num_hidden_layers": 48, '
                   '"num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, '
                   '"sliding_window": 131072, "tie_word_embeddings": false, "use_sliding_window":'
                   ' false, "vocab_size": 152064.'),
    },
    {
        'key': 'deepseek-r1-distill-qwen-32b',
        'hf_id': 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B',
        'shape': {
                     'name': 'DeepSeek-R1-Distill-Qwen-32B',
                     'layers': 64,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 8,
                     'ffn_hidden': 27648,
                     'vocab': 152064,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 32763876352,
                     'published': ('HF API safetensors total: "safetensors":{"parameters":{"BF16"'
                                   ':32763876352},"total":32763876352} '
                                   '(daniel-p-green/alain-ai-learning-platform '
                                   '@1b33775219c224def81d0c3c4e34d2d6630dc83d out/research-deepse'
                                   'ek-ai-deepseek-r1-distill-qwen-32b/sources/huggingface/model.'
                                   'json); card names it 32B (base Qwen2.5-32B)'),
                     'qkv_bias': True,
                     'notes': 'Qwen2: q/k/v bias, no o bias.'},
        'source': ('daniel-p-green/alain-ai-learning-platform '
                   '@1b33775219c224def81d0c3c4e34d2d6630dc83d out/research-deepseek-ai-deepseek-r'
                   '1-distill-qwen-32b/sources/huggingface/config.json (snapshot of the HF '
                   'config, HF sha 711ad2ea6aa40cfca18895e8aca02ab92df1a746): "architectures": '
                   '["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 5120, '
                   '"intermediate_size": 27648, "max_position_embeddings": 131072, '
                   '"max_window_layers": 64, "num_attention_heads": 40, "num_hidden_layers": 64, '
                   '"num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, '
                   '"sliding_window": 131072, "tie_word_embeddings": false, "use_sliding_window":'
                   ' false, "vocab_size": 152064.'),
    },
    {
        'key': 'deepseek-r1-distill-llama-8b',
        'hf_id': 'deepseek-ai/DeepSeek-R1-Distill-Llama-8B',
        'shape': {
                     'name': 'DeepSeek-R1-Distill-Llama-8B',
                     'layers': 32,
                     'hidden': 4096,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 14336,
                     'vocab': 128256,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 8030261248,
                     'published': ('HF API safetensors total: "safetensors":{"parameters":{"BF16"'
                                   ':8030261248},"total":8030261248} '
                                   '(daniel-p-green/alain-ai-learning-platform '
                                   '@1b33775219c224def81d0c3c4e34d2d6630dc83d out/research-deepse'
                                   'ek-ai-deepseek-r1-distill-llama-8b/sources/huggingface/model.'
                                   'json); card: base "Llama-3.1-8B"')},
        'source': ('daniel-p-green/alain-ai-learning-platform '
                   '@1b33775219c224def81d0c3c4e34d2d6630dc83d out/research-deepseek-ai-deepseek-r'
                   '1-distill-llama-8b/sources/huggingface/config.json: "attention_bias": false, '
                   '"hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, '
                   '"max_position_embeddings": 131072, "mlp_bias": false, "num_attention_heads": '
                   '32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,'
                   ' "rope_scaling": {"factor": 8.0, ... "rope_type": "llama3"}, "rope_theta": '
                   '500000.0, "tie_word_embeddings": false, "vocab_size": 128256. Also '
                   'Lightning-AI/litgpt @26857050fe3ff627cd714fe92f5838f51a3d5efa '
                   'litgpt/config.py L3151-3168.'),
    },
    {
        'key': 'deepseek-r1-distill-llama-70b',
        'hf_id': 'deepseek-ai/DeepSeek-R1-Distill-Llama-70B',
        'shape': {
                     'name': 'DeepSeek-R1-Distill-Llama-70B',
                     'layers': 80,
                     'hidden': 8192,
                     'heads': 64,
                     'kv_heads': 8,
                     'ffn_hidden': 28672,
                     'vocab': 128256,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 70553706496,
                     'published': ('Card table: "DeepSeek-R1-Distill-Llama-70B | '
                                   'Llama-3.3-70B-Instruct" (ZHUI/paddlenlp_model_readme '
                                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 '
                                   'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B/index.md L118). '
                                   'Treated as "70B".'),
                     'notes': ("HF config.json of the distill itself not read; litgpt's "
                               'transcription used.')},
        'source': ('Lightning-AI/litgpt @26857050fe3ff627cd714fe92f5838f51a3d5efa '
                   "litgpt/config.py L3170-3188: '# https://huggingface.co/deepseek-ai/DeepSeek-R"
                   "1-Distill-Llama-70B/blob/main/config.json' block_size=131072, "
                   'vocab_size=128000, padded_vocab_size=128256, n_layer=80, n_head=64, '
                   'n_embd=8192, n_query_groups=8, bias=False, norm_class_name="RMSNorm", '
                   'mlp_class_name="LLaMAMLP", intermediate_size=28672, rope_base=500000, '
                   'rope_adjustments=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, '
                   'original_max_seq_len=8192). tie_word_embeddings from the Llama-3.1/3.3-70B '
                   'family config: AI-Hypercomputer/maxtext '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8 '
                   'src/maxtext/checkpoint_conversion/utils/hf_model_configs.py L650-671 '
                   'llama31_70b_config (..., tie_word_embeddings=False).'),
    },
    {
        'key': 'gpt-oss-20b',
        'hf_id': 'openai/gpt-oss-20b',
        'shape': {
                     'name': 'gpt-oss-20b',
                     'layers': 24,
                     'hidden': 2880,
                     'heads': 64,
                     'kv_heads': 8,
                     'ffn_hidden': 2880,
                     'vocab': 201088,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': True,
                     'head_dim': 64,
                     'max_seq_len': 131072},
        'moe': {
                   'experts': 32,
                   'top_k': 4,
                   'expert_ffn_hidden': 2880,
                   'shared_experts': 0,
                   'dense_layers': 0},
        'extra': {
                     'config_params': 20914757184,
                     'published': ('"gpt-oss-20b: 20.9B total parameters (3.6B active), 24 '
                                   'layers, 32 experts per MoE block."; "21B parameters with 3.6B'
                                   ' active parameters" (https://lephongphu.site/?p=726, copy of '
                                   'the OpenAI card); keras-hub preset exact count "params": '
                                   '20_914_757_184 (keras-team/keras-hub '
                                   '@71453d08f59edc90d276e999319fc51e61cbf82c '
                                   'keras_hub/src/models/gpt_oss/gpt_oss_presets.py L9)'),
                     'sliding_window': 128,
                     'sliding_window_pattern': ('layer_types alternates sliding_attention (even '
                                                'layers 0,2,...) / full_attention (odd layers), '
                                                'window 128; learned attention sinks per head'),
                     'config_active_params': 4187440704,
                     'notes': ('EchoCog mirror shows quant_method "gptq" where the official '
                               'config says "mxfp4" (modified mirror); architecture fields '
                               "identical to maxtext's copy of the official config. Weights of "
                               'the MoE experts are stored MXFP4 in the official checkpoint, so '
                               "HF 'safetensors' counts (U8 bytes) are not parameter counts. "
                               'Computed count includes attention q/k/v/o biases, per-head sinks,'
                               " router weight+bias and per-expert biases; it equals keras-hub's "
                               'exact figure. The plain brief formula (no expert/attention '
                               'extras) would give 20,908,119,360. Computed active (4 experts, '
                               'incl. both embeddings) = 4,187,440,704; minus the input embedding'
                               ' (201088*2880 = 579,133,440) this is 3,608,307,264, matching the '
                               'published active figure.')},
        'source': ('EchoCog/gpt-oss-20b @52971a17bf2f66dd519c8d26217b1405e425a246 config.json: '
                   '"attention_bias": true, "experts_per_token": 4, "head_dim": 64, "hidden_act":'
                   ' "silu", "hidden_size": 2880, "intermediate_size": 2880, "layer_types": '
                   '["sliding_attention", "full_attention", ...], "max_position_embeddings": '
                   '131072, "num_attention_heads": 64, "num_experts_per_tok": 4, '
                   '"num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32, '
                   '"rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, '
                   '"original_max_position_embeddings": 4096, "rope_type": "yarn"}, "rope_theta":'
                   ' 150000, "sliding_window": 128, "swiglu_limit": 7.0, "tie_word_embeddings": '
                   'false, "vocab_size": 201088. Same values in AI-Hypercomputer/maxtext '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8 '
                   'src/maxtext/checkpoint_conversion/utils/hf_model_configs.py L1147-1213 '
                   'gpt_oss_20b_dict. Layer structure (biases, sinks, router bias): '
                   'openai/gpt-oss @7b583341fe16729127f6d5b94a7b09ccae97e1a1 '
                   'gpt_oss/torch/model.py L189-190 (self.sinks = '
                   'Parameter(num_attention_heads)), L196-201 (qkv / out Linear with bias), L271 '
                   '(gate Linear), L275-305 (mlp1_weight, mlp1_bias, mlp2_weight, mlp2_bias).'),
    },
    {
        'key': 'gpt-oss-120b',
        'hf_id': 'openai/gpt-oss-120b',
        'shape': {
                     'name': 'gpt-oss-120b',
                     'layers': 36,
                     'hidden': 2880,
                     'heads': 64,
                     'kv_heads': 8,
                     'ffn_hidden': 2880,
                     'vocab': 201088,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': True,
                     'head_dim': 64,
                     'max_seq_len': 131072},
        'moe': {
                   'experts': 128,
                   'top_k': 4,
                   'expert_ffn_hidden': 2880,
                   'shared_experts': 0,
                   'dense_layers': 0},
        'extra': {
                     'config_params': 116829156672,
                     'published': ('"gpt-oss-120b: 116.8B total parameters (5.1B active), 36 '
                                   'layers, 128 experts per MoE block."; "117B parameters with '
                                   '5.1B active parameters" (https://lephongphu.site/?p=726); '
                                   'keras-hub preset exact count "params": 116_829_156_672 '
                                   '(keras-team/keras-hub '
                                   '@71453d08f59edc90d276e999319fc51e61cbf82c '
                                   'keras_hub/src/models/gpt_oss/gpt_oss_presets.py L21)'),
                     'sliding_window': 128,
                     'sliding_window_pattern': ('layer_types alternates sliding_attention (even '
                                                'layers 0,2,...) / full_attention (odd layers), '
                                                'window 128; learned attention sinks per head'),
                     'config_active_params': 5711982912,
                     'notes': (' Weights of the MoE experts are stored MXFP4 in the official '
                               "checkpoint, so HF 'safetensors' counts (U8 bytes) are not "
                               'parameter counts. Computed count includes attention q/k/v/o '
                               'biases, per-head sinks, router weight+bias and per-expert biases;'
                               " it equals keras-hub's exact figure. The plain brief formula (no "
                               'expert/attention extras) would give 116,789,336,640. Computed '
                               'active (4 experts, incl. both embeddings) = 5,711,982,912; minus '
                               'the input embedding (201088*2880 = 579,133,440) this is '
                               '5,132,849,472, matching the published active figure.')},
        'source': ('daniel-p-green/alain-ai-learning-platform '
                   '@1b33775219c224def81d0c3c4e34d2d6630dc83d '
                   'out/research-openai-gpt-oss-120b/sources/huggingface/config.json: '
                   '"attention_bias": true, "experts_per_token": 4, "head_dim": 64, "hidden_act":'
                   ' "silu", "hidden_size": 2880, "intermediate_size": 2880, "layer_types": '
                   '["sliding_attention", "full_attention", ...], "max_position_embeddings": '
                   '131072, "num_attention_heads": 64, "num_experts_per_tok": 4, '
                   '"num_hidden_layers": 36, "num_key_value_heads": 8, "num_local_experts": 128, '
                   '"rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, '
                   '"original_max_position_embeddings": 4096, "rope_type": "yarn"}, "rope_theta":'
                   ' 150000, "sliding_window": 128, "swiglu_limit": 7.0, "tie_word_embeddings": '
                   'false, "vocab_size": 201088. Same values in AI-Hypercomputer/maxtext '
                   '@e591f30cbbf217ed67ef71263ec0538239f9c3b8 '
                   'src/maxtext/checkpoint_conversion/utils/hf_model_configs.py L1217-1295 '
                   'gpt_oss_120b_dict. Layer structure (biases, sinks, router bias): '
                   'openai/gpt-oss @7b583341fe16729127f6d5b94a7b09ccae97e1a1 '
                   'gpt_oss/torch/model.py L189-190 (self.sinks = '
                   'Parameter(num_attention_heads)), L196-201 (qkv / out Linear with bias), L271 '
                   '(gate Linear), L275-305 (mlp1_weight, mlp1_bias, mlp2_weight, mlp2_bias).'),
    },
    {
        'key': 'olmo-2-7b',
        'hf_id': 'allenai/OLMo-2-1124-7B',
        'shape': {
                     'name': 'OLMo 2 7B',
                     'layers': 32,
                     'hidden': 4096,
                     'heads': 32,
                     'kv_heads': 32,
                     'ffn_hidden': 11008,
                     'vocab': 100352,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 4096},
        'moe': None,
        'extra': {
                     'config_params': 7298617344,
                     'published': ('"We introduce OLMo 2, a new family of 7B and 13B models"; '
                                   'table "OLMo 2 7B | 4 Trillion | 32 | 4096 | 32 | 4096" '
                                   '(https://huggingface.co/allenai/OLMo-2-1124-13B card, pages '
                                   'corpus)'),
                     'qk_norm': True,
                     'notes': ('Reordered (post-sublayer) RMSNorm: no pre-norms; each layer has '
                               'post_attention_layernorm and post_feedforward_layernorm. QK-norm '
                               'is RMSNorm over the full q projection (heads*head_dim) and full k'
                               ' projection (kv_heads*head_dim), not per head. Tokenizer has '
                               '100278 entries; embedding padded to 100352.')},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L2220-2237 "olmo2_7b": "architectures": '
                   '["Olmo2ForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, '
                   '"intermediate_size": 11008, "max_position_embeddings": 4096, '
                   '"num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": '
                   '32, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "tie_word_embeddings": '
                   'False, "vocab_size": 100352. Norm layout / QK-norm: allenai/OLMo-core '
                   '@fa6c5014c9f6e9ee789da2d9c20d5126fee8df0d '
                   'src/olmo_core/nn/transformer/config.py L714-756 (olmo2_7B/13B/32B: '
                   'block_name=TransformerBlockType.reordered_norm, qk_norm=True, '
                   'rope_theta=500_000, layer_norm_eps=1e-6; olmo2_32B: d_model=5120, '
                   'n_layers=64, n_heads=40, n_kv_heads=8, '
                   'hidden_size_multiplier=27648/(8*d_model/3)); Lightning-AI/litgpt '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa litgpt/config.py L1006-1057 '
                   '(OLMo-2-1124-7B/13B: vocab_size=100278, padded_vocab_size=100352, '
                   'norm_qk=True, norm_qk_type="olmo2", post_attention_norm=True, '
                   'post_mlp_norm=True, norm_1=False, norm_2=False).'),
    },
    {
        'key': 'olmo-2-13b',
        'hf_id': 'allenai/OLMo-2-1124-13B',
        'shape': {
                     'name': 'OLMo 2 13B',
                     'layers': 40,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 40,
                     'ffn_hidden': 13824,
                     'vocab': 100352,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 4096},
        'moe': None,
        'extra': {
                     'config_params': 13716198400,
                     'published': ('table row "OLMo 2 13B | 5 Trillion | 40 | 5120 | 40 | 4096" '
                                   '(https://huggingface.co/allenai/OLMo-2-1124-13B); note older '
                                   'card revisions show 42 heads (https://huggingface.co/allenai/'
                                   'OLMo-2-1124-13B/resolve/bf5d4228dfa97b13cf2b8579ebbfd167f4bd6'
                                   'b76/README.md) - config says 40'),
                     'qk_norm': True,
                     'notes': ('Reordered (post-sublayer) RMSNorm: no pre-norms; each layer has '
                               'post_attention_layernorm and post_feedforward_layernorm. QK-norm '
                               'is RMSNorm over the full q projection (heads*head_dim) and full k'
                               ' projection (kv_heads*head_dim), not per head. Tokenizer has '
                               '100278 entries; embedding padded to 100352.')},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L2238-2255 "olmo2_13b": "architectures":'
                   ' ["Olmo2ForCausalLM"], "hidden_act": "silu", "hidden_size": 5120, '
                   '"intermediate_size": 13824, "max_position_embeddings": 4096, '
                   '"num_attention_heads": 40, "num_hidden_layers": 40, "num_key_value_heads": '
                   '40, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "tie_word_embeddings": '
                   'False, "vocab_size": 100352. Norm layout / QK-norm: allenai/OLMo-core '
                   '@fa6c5014c9f6e9ee789da2d9c20d5126fee8df0d '
                   'src/olmo_core/nn/transformer/config.py L714-756 (olmo2_7B/13B/32B: '
                   'block_name=TransformerBlockType.reordered_norm, qk_norm=True, '
                   'rope_theta=500_000, layer_norm_eps=1e-6; olmo2_32B: d_model=5120, '
                   'n_layers=64, n_heads=40, n_kv_heads=8, '
                   'hidden_size_multiplier=27648/(8*d_model/3)); Lightning-AI/litgpt '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa litgpt/config.py L1006-1057 '
                   '(OLMo-2-1124-7B/13B: vocab_size=100278, padded_vocab_size=100352, '
                   'norm_qk=True, norm_qk_type="olmo2", post_attention_norm=True, '
                   'post_mlp_norm=True, norm_1=False, norm_2=False).'),
    },
    {
        'key': 'olmo-2-32b',
        'hf_id': 'allenai/OLMo-2-0325-32B',
        'shape': {
                     'name': 'OLMo 2 32B',
                     'layers': 64,
                     'hidden': 5120,
                     'heads': 40,
                     'kv_heads': 8,
                     'ffn_hidden': 27648,
                     'vocab': 100352,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 4096},
        'moe': None,
        'extra': {
                     'config_params': 32234279936,
                     'published': ('"OLMo-2 32B pretraining follows a two-stage training '
                                   'procedure" / "| stage 1 | **32B** | 6T tokens |" '
                                   '(allenai/OLMo-core @fa6c5014c9f6e9ee789da2d9c20d5126fee8df0d '
                                   'src/scripts/official/OLMo2/README.md L3, L9)'),
                     'qk_norm': True,
                     'notes': ('Reordered (post-sublayer) RMSNorm: no pre-norms; each layer has '
                               'post_attention_layernorm and post_feedforward_layernorm. QK-norm '
                               'is RMSNorm over the full q projection (heads*head_dim) and full k'
                               ' projection (kv_heads*head_dim), not per head. Tokenizer has '
                               '100278 entries; embedding padded to 100352.')},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L2256-2273 "olmo2_32b": "architectures":'
                   ' ["Olmo2ForCausalLM"], "hidden_act": "silu", "hidden_size": 5120, '
                   '"intermediate_size": 27648, "max_position_embeddings": 4096, '
                   '"num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 8,'
                   ' "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "tie_word_embeddings": False,'
                   ' "vocab_size": 100352. Norm layout / QK-norm: allenai/OLMo-core '
                   '@fa6c5014c9f6e9ee789da2d9c20d5126fee8df0d '
                   'src/olmo_core/nn/transformer/config.py L714-756 (olmo2_7B/13B/32B: '
                   'block_name=TransformerBlockType.reordered_norm, qk_norm=True, '
                   'rope_theta=500_000, layer_norm_eps=1e-6; olmo2_32B: d_model=5120, '
                   'n_layers=64, n_heads=40, n_kv_heads=8, '
                   'hidden_size_multiplier=27648/(8*d_model/3)); Lightning-AI/litgpt '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa litgpt/config.py L1006-1057 '
                   '(OLMo-2-1124-7B/13B: vocab_size=100278, padded_vocab_size=100352, '
                   'norm_qk=True, norm_qk_type="olmo2", post_attention_norm=True, '
                   'post_mlp_norm=True, norm_1=False, norm_2=False).'),
    },
    {
        'key': 'smollm2-135m',
        'hf_id': 'HuggingFaceTB/SmolLM2-135M',
        'shape': {
                     'name': 'SmolLM2 135M',
                     'layers': 30,
                     'hidden': 576,
                     'heads': 9,
                     'kv_heads': 3,
                     'ffn_hidden': 1536,
                     'vocab': 49152,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 8192},
        'moe': None,
        'extra': {
                     'config_params': 134515008,
                     'published': ('"The family contains three sizes, 135M, 360M, and 1.7 billion'
                                   ' parameters" (https://aiwiki.ai/wiki/smollm_2)'),
                     'notes': ("head_dim 64. Computed 134,515,008 equals the 'Original model : "
                               "134515008' count printed in an unattributed SmolLM2-135M "
                               're-implementation README found via the code search.')},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L1948-1982 "smollm2_135m": '
                   '"architectures": ["LlamaForCausalLM"], "attention_bias": False, '
                   '"hidden_size": 576, "intermediate_size": 1536, "max_position_embeddings": '
                   '8192, "mlp_bias": False, "num_attention_heads": 9, "num_hidden_layers": 30, '
                   '"num_key_value_heads": 3, "rms_norm_eps": 1e-05, "rope_theta": 100000, '
                   '"tie_word_embeddings": True, "vocab_size": 49152. Cross-check '
                   'pytorch/executorch @cff6f4dd32e630945b7188512c1f2b4f102b05ad '
                   'examples/models/smollm2/135M_config.json ("dim": 576, "hidden_dim": 1536, '
                   '"n_heads": 9, "n_kv_heads": 3, "n_layers": 30, "vocab_size": 49152).'),
    },
    {
        'key': 'smollm2-360m',
        'hf_id': 'HuggingFaceTB/SmolLM2-360M',
        'shape': {
                     'name': 'SmolLM2 360M',
                     'layers': 32,
                     'hidden': 960,
                     'heads': 15,
                     'kv_heads': 5,
                     'ffn_hidden': 2560,
                     'vocab': 49152,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 8192},
        'moe': None,
        'extra': {
                     'config_params': 361821120,
                     'published': ('"The family contains three sizes, 135M, 360M, and 1.7 billion'
                                   ' parameters" (https://aiwiki.ai/wiki/smollm_2)'),
                     'notes': 'head_dim 64.'},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L2021-2055 "smollm2_360m": '
                   '"hidden_size": 960, "intermediate_size": 2560, "max_position_embeddings": '
                   '8192, "num_attention_heads": 15, "num_hidden_layers": 32, '
                   '"num_key_value_heads": 5, "rms_norm_eps": 1e-05, "rope_theta": 100000, '
                   '"tie_word_embeddings": True, "vocab_size": 49152.'),
    },
    {
        'key': 'smollm2-1.7b',
        'hf_id': 'HuggingFaceTB/SmolLM2-1.7B',
        'shape': {
                     'name': 'SmolLM2 1.7B',
                     'layers': 24,
                     'hidden': 2048,
                     'heads': 32,
                     'kv_heads': 32,
                     'ffn_hidden': 8192,
                     'vocab': 49152,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 8192},
        'moe': None,
        'extra': {
                     'config_params': 1711376384,
                     'published': ('"SmolLM2, a state-of-the-art \\"small\\" (1.7 billion '
                                   'parameter) language model" (arXiv 2502.02737 abstract, '
                                   'https://hf.wing.moe/papers/2502.02737)'),
                     'notes': 'MHA (kv_heads = heads).'},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L1983-2020 (commented-out preset '
                   '"smollm2_1_7b"): "hidden_size": 2048, "intermediate_size": 8192, '
                   '"max_position_embeddings": 8192, "num_attention_heads": 32, '
                   '"num_hidden_layers": 24, "num_key_value_heads": 32, "rms_norm_eps": 1e-05, '
                   '"rope_theta": 130000, "tie_word_embeddings": True, "vocab_size": 49152. '
                   'Pretraining config huggingface/smollm '
                   '@a041759883ec7152d18fb985ea49be641a0bceef '
                   'text/pretraining/smollm2/config_smollm2_1B.yaml L37-57 agrees on shapes '
                   '(hidden_size 2048, intermediate_size 8192, num_attention_heads 32, '
                   'num_hidden_layers 24, num_key_value_heads 32, tie_word_embeddings true, '
                   'vocab_size 49152) but shows max_position_embeddings 2048 / rope_theta 10000 '
                   '(stage-1 training values; the released config has 8192 / 130000).'),
    },
    {
        'key': 'smollm3-3b',
        'hf_id': 'HuggingFaceTB/SmolLM3-3B',
        'shape': {
                     'name': 'SmolLM3 3B',
                     'layers': 36,
                     'hidden': 2048,
                     'heads': 16,
                     'kv_heads': 4,
                     'ffn_hidden': 11008,
                     'vocab': 128256,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 65536},
        'moe': None,
        'extra': {
                     'config_params': 3075098624,
                     'published': ('"In terms of training configuration, SmolLM3 has 3.08B '
                                   'parameters, a depth structure of 36 layers" '
                                   '(https://www.aibase.com/news/19552); keras-hub smollm3_3b_en '
                                   '"params": 3075100928 (keras-team/keras-hub '
                                   '@71453d08f59edc90d276e999319fc51e61cbf82c '
                                   'keras_hub/src/models/smollm3/smollm3_presets.py L11)'),
                     'notes': ('Card advertises 128k via YaRN extrapolation; config '
                               'max_position_embeddings 65536. Computed 3,075,098,624 vs '
                               'keras-hub 3,075,100,928: keras-hub reports 2,304 more (= 36 '
                               'layers x 64); likely a keras implementation artefact (e.g. non-HF'
                               ' per-layer buffer) - not resolved.')},
        'source': ('fetchwiki/HuggingFaceTB-SmolLM3-3B @24f7882f92998ee0e691d105ade637afc3e5171f '
                   'config.json (mirror of the HF config): "architectures": '
                   '["SmolLM3ForCausalLM"], "attention_bias": false, "hidden_act": "silu", '
                   '"hidden_size": 2048, "intermediate_size": 11008, "max_position_embeddings": '
                   '65536, "mlp_bias": false, "no_rope_layer_interval": 4, "no_rope_layers": [1, '
                   '1, 1, 0, ...], "num_attention_heads": 16, "num_hidden_layers": 36, '
                   '"num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, '
                   '"sliding_window": null, "use_sliding_window": false, "vocab_size": 128256. '
                   'Tied embeddings: huggingface/smollm @a041759883ec7152d18fb985ea49be641a0bceef'
                   ' text/pretraining/smollm3/long_context_32k_to_64.yaml L243 '
                   "'tie_word_embeddings: true' (the HF config omits the key; SmolLM3Config "
                   'default). Cross-check pytorch/executorch '
                   '@cff6f4dd32e630945b7188512c1f2b4f102b05ad '
                   'examples/models/smollm3/3b_config.json.'),
    },
    {
        'key': 'granite-3.1-2b',
        'hf_id': 'ibm-granite/granite-3.1-2b-base',
        'shape': {
                     'name': 'Granite 3.1 2B',
                     'layers': 40,
                     'hidden': 2048,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 8192,
                     'vocab': 49155,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 2533531648,
                     'published': ('"Granite-3.1-2B-Instruct is a 2B parameter long-context '
                                   'instruct model" '
                                   '(https://www.fitmyllm.com/model/granite-3.1-2b, card copy); '
                                   'IBM repo README: "Dense Models: 2B and 8B parameter models, '
                                   'trained on 12 trillion tokens in total." '
                                   '(ibm-granite/granite-3.1-language-models README.md @255bff67)'),
                     'notes': ("HF config.json itself not found; IBM's own reference "
                               'implementation (fms) used. Granite muP multipliers (embedding 12,'
                               ' residual 0.22, attention 1/64, logits /8) do not change '
                               'parameter count. executorch '
                               'examples/models/granite/config/2b_config.json has vocab 49159 and'
                               ' rope_theta 1e7 - that is a later Granite 3.x 2B, not 3.1.')},
        'source': ('foundation-model-stack/foundation-model-stack '
                   '@062adf6e1111850aa1c2abf7a678cfb95e35f59a fms/models/granite.py L419-435 '
                   '_3_1_2b_config = GraniteConfig(src_vocab_size=49155, emb_dim=2048, '
                   'norm_eps=1e-5, nheads=32, kvheads=8, nlayers=40, hidden_grow_factor=8192 / '
                   '2048, max_expected_seq_len=131072, rope_theta=5000000.0, tie_heads=True, '
                   'embedding_multiplier=12.0, logits_scaling=8.0, residual_multiplier=0.22, '
                   'attention_multiplier=0.015625). Unattributed test (search-index file id '
                   "53141176458, '// Exact config from ibm-granite/granite-3.1-2b-base'): "
                   '"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 40, '
                   '"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 49155, '
                   '"rope_theta": 5000000.0.'),
    },
    {
        'key': 'granite-3.1-8b',
        'hf_id': 'ibm-granite/granite-3.1-8b-base',
        'shape': {
                     'name': 'Granite 3.1 8B',
                     'layers': 40,
                     'hidden': 4096,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 12800,
                     'vocab': 49155,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 131072},
        'moe': None,
        'extra': {
                     'config_params': 8170848256,
                     'published': ('"Notes: 8.1B Model Architecture: Granite-3.1-8B-Base is based'
                                   ' on a decoder-only dense transformer architecture. Core '
                                   'components of this architecture are: GQA and RoPE, MLP with '
                                   'SwiGLU, RMSNorm, and shared input/output embeddings." '
                                   '(https://aiportalx.com/ibm/granite-3.1-8b)'),
                     'notes': ("fms '_8b_config' is the Granite 3.0-era 8B registration (max "
                               '8192, rope 1e4); Granite 3.1 keeps the same shapes but is '
                               'extended to 128K (max_position_embeddings 131072, larger '
                               'rope_theta - value for 3.1-8B not verified here; a later Granite '
                               '8B config seen unattributed has rope_theta 1e7 and vocab 49159). '
                               'HF 3.1 config.json itself not found.')},
        'source': ('foundation-model-stack/foundation-model-stack '
                   '@062adf6e1111850aa1c2abf7a678cfb95e35f59a fms/models/granite.py L400-417 '
                   '_8b_config = GraniteConfig(src_vocab_size=49155, emb_dim=4096, norm_eps=1e-5,'
                   ' nheads=32, kvheads=8, nlayers=40, hidden_grow_factor=12800 / 4096, '
                   'max_expected_seq_len=8192, rope_theta=10_000.0, tie_heads=True, '
                   'embedding_multiplier=12.0, logits_scaling=16.0, residual_multiplier=0.22, '
                   'attention_multiplier=0.0078125); fms '
                   'tests/models/hf_equivalence/test_granite.py L18 compares against '
                   '"ibm-granite/granite-3.1-8b-base". Context: '
                   'ibm-granite/granite-3.1-language-models README.md: "Granite 3.1 language '
                   'models extend the context length of Granite 3.0 language models from 4K to '
                   '128K".'),
    },
    {
        'key': 'starcoder2-3b',
        'hf_id': 'bigcode/starcoder2-3b',
        'shape': {
                     'name': 'StarCoder2-3B',
                     'layers': 30,
                     'hidden': 3072,
                     'heads': 24,
                     'kv_heads': 2,
                     'ffn_hidden': 12288,
                     'vocab': 49152,
                     'mlp': 'gelu',
                     'norm': 'layernorm',
                     'tied_embeddings': True,
                     'bias': True,
                     'max_seq_len': 16384},
        'moe': None,
        'extra': {
                     'config_params': 3030371328,
                     'published': ('"Parameter Count | 3.03B" '
                                   '(https://www.promptlayer.com/models/starcoder2-3b); "a '
                                   '3-billion-parameter model trained by ServiceNow" '
                                   '(https://ai-360.online/tag/starcoder2)'),
                     'sliding_window': 4096,
                     'sliding_window_pattern': 'sliding_window 4096 on every layer (16k context)',
                     'notes': ('Plain (non-gated) GELU-tanh MLP c_fc/c_proj with biases; q/k/v/o '
                               'biases; LayerNorm with bias. tie_word_embeddings: key absent from'
                               ' the quoted config copies (HF default = tied); tied is also the '
                               'only choice that reproduces the published size (3B: tied 3.03B vs'
                               " untied 3.18B; 7B: tied 7.17B vs untied 7.40B). NeMo's HF "
                               'importer sets share_embeddings_and_output_weights=False for all '
                               'sizes - conflict, flagged. ')},
        'source': ('NVIDIA/NeMo @8cfedd7203462cb251a914e700e5605444277561 '
                   'nemo/collections/llm/gpt/model/starcoder2.py L64-76 Starcoder2Config3B: '
                   'num_layers 30, hidden_size 3072, ffn_hidden_size 12288, num_query_groups 2, '
                   'num_attention_heads 24, rotary_base 999999.4420358813; base class L38-58: '
                   'normalization "LayerNorm", activation_func F.gelu, add_bias_linear True, '
                   'seq_length 16384. Unattributed copy of the HF config (search-index file id '
                   "59225653557, 'Golden values from bigcode/starcoder2-3b's real config.json'): "
                   '"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, '
                   '"num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,'
                   ' "max_position_embeddings": 16384, "norm_epsilon": 1e-05, "rope_theta": '
                   '999999.4420358813, "sliding_window": 4096, "use_bias": true.'),
    },
    {
        'key': 'starcoder2-7b',
        'hf_id': 'bigcode/starcoder2-7b',
        'shape': {
                     'name': 'StarCoder2-7B',
                     'layers': 32,
                     'hidden': 4608,
                     'heads': 36,
                     'kv_heads': 4,
                     'ffn_hidden': 18432,
                     'vocab': 49152,
                     'mlp': 'gelu',
                     'norm': 'layernorm',
                     'tied_embeddings': True,
                     'bias': True,
                     'max_seq_len': 16384},
        'moe': None,
        'extra': {
                     'config_params': 7173923840,
                     'published': ('"a 7-billion-parameter model trained by Hugging Face" '
                                   '(https://ai-360.online/tag/starcoder2)'),
                     'sliding_window': 4096,
                     'sliding_window_pattern': 'sliding_window 4096 on every layer (16k context)',
                     'notes': ('Plain (non-gated) GELU-tanh MLP c_fc/c_proj with biases; q/k/v/o '
                               'biases; LayerNorm with bias. tie_word_embeddings: key absent from'
                               ' the quoted config copies (HF default = tied); tied is also the '
                               'only choice that reproduces the published size (3B: tied 3.03B vs'
                               " untied 3.18B; 7B: tied 7.17B vs untied 7.40B). NeMo's HF "
                               'importer sets share_embeddings_and_output_weights=False for all '
                               'sizes - conflict, flagged. ')},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L1832-1863 "starcoder2": "hidden_act": '
                   '"gelu_pytorch_tanh", "hidden_size": 4608, "intermediate_size": 18432, '
                   '"max_position_embeddings": 16384, "norm_type": "layer_norm", '
                   '"num_attention_heads": 36, "num_hidden_layers": 32, "num_key_value_heads": 4,'
                   ' "rope_theta": 1000000, "sliding_window": 4096, "use_bias": True, '
                   '"vocab_size": 49152 (no tie_word_embeddings key). Also NVIDIA/NeMo '
                   '@8cfedd7203462cb251a914e700e5605444277561 '
                   'nemo/collections/llm/gpt/model/starcoder2.py L79-91 Starcoder2Config7B.'),
    },
    {
        'key': 'starcoder2-15b',
        'hf_id': 'bigcode/starcoder2-15b',
        'shape': {
                     'name': 'StarCoder2-15B',
                     'layers': 40,
                     'hidden': 6144,
                     'heads': 48,
                     'kv_heads': 4,
                     'ffn_hidden': 24576,
                     'vocab': 49152,
                     'mlp': 'gelu',
                     'norm': 'layernorm',
                     'tied_embeddings': False,
                     'bias': True,
                     'max_seq_len': 16384},
        'moe': None,
        'extra': {
                     'config_params': 15957889024,
                     'published': ('"StarCoder2-15B model is a 15B parameter model trained on '
                                   '600+ programming languages from The Stack v2" (HF card, https'
                                   '://huggingface.co/bigcode/starcoder2-15b/resolve/10b4a57353e5'
                                   '10ed60245ac0e78f16fe46cbf0a7/README.md?download=true)'),
                     'sliding_window': 4096,
                     'sliding_window_pattern': 'sliding_window 4096 on every layer (16k context)',
                     'notes': ('Plain (non-gated) GELU-tanh MLP c_fc/c_proj with biases; q/k/v/o '
                               'biases; LayerNorm with bias. tie_word_embeddings: the 15B config '
                               'says false explicitly.  Third-party page '
                               'https://pcpartguide.com/local-llms/starcoder2-15b claims 8 KV '
                               'heads, SwiGLU and RMSNorm - contradicts the config (4 KV heads, '
                               'GELU-tanh, LayerNorm); ignored.')},
        'source': ('Unattributed copy of bigcode starcoder2-15b config.json (search-index file id'
                   " 53112043041, 'config: /store3/maowy/models/starcoder2-15b/config.json'): "
                   '"hidden_act": "gelu_pytorch_tanh", "hidden_size": 6144, "intermediate_size": '
                   '24576, "max_position_embeddings": 16384, "norm_type": "layer_norm", '
                   '"num_attention_heads": 48, "num_hidden_layers": 40, "num_key_value_heads": 4,'
                   ' "rope_theta": 100000, "sliding_window": 4096, "tie_word_embeddings": false, '
                   '"use_bias": true, "vocab_size": 49152. Shapes confirmed by NVIDIA/NeMo '
                   '@8cfedd7203462cb251a914e700e5605444277561 '
                   'nemo/collections/llm/gpt/model/starcoder2.py L94-106 Starcoder2Config15B '
                   '(num_layers 40, hidden_size 6144, ffn_hidden_size 24576, num_query_groups 4, '
                   'num_attention_heads 48, rotary_base 100_000).'),
    },
    {
        'key': 'falcon-7b',
        'hf_id': 'tiiuae/falcon-7b',
        'shape': {
                     'name': 'Falcon 7B',
                     'layers': 32,
                     'hidden': 4544,
                     'heads': 71,
                     'kv_heads': 1,
                     'ffn_hidden': 18176,
                     'vocab': 65024,
                     'mlp': 'gelu',
                     'norm': 'layernorm',
                     'tied_embeddings': True,
                     'bias': False,
                     'max_seq_len': 2048},
        'moe': None,
        'extra': {
                     'config_params': 6921720704,
                     'published': ('"Falcon-7B is a 7B parameters causal decoder-only model built'
                                   ' by TII and trained on 1,500B tokens of RefinedWeb" '
                                   '(ZHUI/paddlenlp_model_readme '
                                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 '
                                   'tiiuae/falcon-7b/index.md L20)'),
                     'notes': ('FFN = 4*hidden = 18176 (not a config key in HF falcon). Tied '
                               'embeddings: HF FalconForCausalLM ties lm_head to word_embeddings '
                               '(config has no tie_word_embeddings key -> default true); the NeMo'
                               ' launcher yaml says share_embeddings_and_output_weights false - '
                               'conflict. Computed count with 1 LayerNorm per layer (not 2) per '
                               'the parallel-block design. If untied, +295M.')},
        'source': ('Lightning-AI/litgpt @26857050fe3ff627cd714fe92f5838f51a3d5efa '
                   "litgpt/config.py L485-500: '# "
                   "https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json' "
                   'block_size=2048, vocab_size=65024, padded_vocab_size=65024, n_layer=32, '
                   'n_head=71, n_embd=4544, rotary_percentage=1.0, n_query_groups=1, bias=False, '
                   'shared_attention_norm=True. Card table (ZHUI/paddlenlp_model_readme '
                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 tiiuae/falcon-7b/index.md '
                   'L191-199): "Decoder-block: parallel attention/MLP with a single layer norm." '
                   '| Layers 32 | d_model 4544 | head_dim 64 | Vocabulary 65024 | Sequence length'
                   ' 2048. FFN size: NVIDIA/NeMo-Framework-Launcher '
                   '@26e42fa91d9e608897ce485b4911c263a4b57008 '
                   'launcher_scripts/conf/training/falcon/falcon_7b.yaml L57-88: num_layers 32, '
                   'hidden_size 4544, ffn_hidden_size 18176, num_attention_heads 71, '
                   'normalization layernorm, bias false, activation gelu, num_query_groups 1, '
                   'share_embeddings_and_output_weights false.'),
    },
    {
        'key': 'mistral-7b-v0.3',
        'hf_id': 'mistralai/Mistral-7B-v0.3',
        'shape': {
                     'name': 'Mistral 7B v0.3',
                     'layers': 32,
                     'hidden': 4096,
                     'heads': 32,
                     'kv_heads': 8,
                     'ffn_hidden': 14336,
                     'vocab': 32768,
                     'mlp': 'swiglu',
                     'norm': 'rmsnorm',
                     'tied_embeddings': False,
                     'bias': False,
                     'max_seq_len': 32768},
        'moe': None,
        'extra': {
                     'config_params': 7248023552,
                     'published': ('No total in the v0.3 card ("Extended vocabulary to 32768", '
                                   'ZHUI/paddlenlp_model_readme '
                                   '@40a7101e89dcf9a0dedb0e0d48c8c357fcc95996 '
                                   'mistralai/Mistral-7B-Instruct-v0.3/index.md L15); keras-hub '
                                   'preset mistral_0.3_7b_en: "description": "Mistral 7B base '
                                   'version 0.3 model", "params": 7248023552 '
                                   '(keras-team/keras-hub '
                                   '@71453d08f59edc90d276e999319fc51e61cbf82c '
                                   'keras_hub/src/models/mistral/mistral_presets.py L16-17)'),
                     'notes': 'head_dim 128.'},
        'source': ('mlc-ai/mlc-llm @79d603f085f50500e9509fa01785ffa7ecfaaa93 '
                   'python/mlc_llm/model/model_preset.py L228-250 "mistral_7b_v03": '
                   '"architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size":'
                   ' 4096, "intermediate_size": 14336, "max_position_embeddings": 32768, '
                   '"num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,'
                   ' "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": None, '
                   '"tie_word_embeddings": False, "vocab_size": 32768. Also Lightning-AI/litgpt '
                   '@26857050fe3ff627cd714fe92f5838f51a3d5efa litgpt/config.py L2095-2113 '
                   '(Mistral-7B-v0.3).'),
    },
)


def _shape(card: dict) -> ModelShape:
    moe = MoE(**card["moe"]) if card["moe"] else None
    return ModelShape(**card["shape"], moe=moe, source=card["source"],
                      extra={"hf_id": card["hf_id"], **card["extra"]})


PUBLISHED: dict[str, ModelShape] = {card["key"]: _shape(card) for card in CARDS}
# Hugging Face ids (lower case) -> catalog key: an imported config.json or recipe that names a
# checkpoint finds its record here
HUB_IDS: dict[str, str] = {card["hf_id"].lower(): card["key"] for card in CARDS}
