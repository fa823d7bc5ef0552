"""The keys a Transformers ``TrainingArguments`` / TRL ``SFTConfig`` file may hold (the
``training_args`` reader refuses any other). tests/test_import_readers.py holds
``TRAINING_ARGUMENTS`` equal to the installed library's fields."""
from __future__ import annotations

# transformers 5.25 training_args.py: dataclasses.fields(TrainingArguments) (init fields)
TRAINING_ARGUMENTS = (
    "output_dir", "per_device_train_batch_size", "num_train_epochs", "max_steps",
    "learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "optim",
    "optim_args", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
    "optim_target_modules", "gradient_accumulation_steps", "average_tokens_across_devices",
    "max_grad_norm", "label_smoothing_factor", "bf16", "fp16", "bf16_full_eval",
    "fp16_full_eval", "tf32", "activation_checkpointing", "activation_checkpointing_kwargs",
    "gradient_checkpointing", "gradient_checkpointing_kwargs", "torch_compile",
    "torch_compile_backend", "torch_compile_mode", "use_liger_kernel", "liger_kernel_config",
    "use_cache", "neftune_noise_alpha", "torch_empty_cache_steps", "auto_find_batch_size",
    "logging_strategy", "logging_steps", "logging_first_step", "log_on_each_node",
    "logging_nan_inf_filter", "include_num_input_tokens_seen", "log_level",
    "log_level_replica", "disable_tqdm", "report_to", "run_name", "project",
    "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id", "eval_strategy",
    "eval_steps", "eval_delay", "per_device_eval_batch_size", "prediction_loss_only",
    "eval_on_start", "eval_do_concat_batches", "eval_use_gather_object",
    "eval_accumulation_steps", "include_for_metrics", "batch_eval_metrics", "save_only_model",
    "save_strategy", "save_steps", "save_on_each_node", "save_total_limit",
    "enable_jit_checkpoint", "push_to_hub", "hub_token", "hub_private_repo", "hub_model_id",
    "hub_strategy", "hub_always_push", "hub_revision", "load_best_model_at_end",
    "metric_for_best_model", "greater_is_better", "ignore_data_skip",
    "restore_callback_states_from_checkpoint", "full_determinism", "seed", "data_seed",
    "use_cpu", "accelerator_config", "parallelism_config", "dataloader_drop_last",
    "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
    "dataloader_prefetch_factor", "dataloader_multiprocessing_context", "dataloader_in_order",
    "remove_unused_columns", "label_names", "train_sampling_strategy", "length_column_name",
    "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers",
    "ddp_static_graph", "ddp_backend", "ddp_timeout", "fsdp", "fsdp_config", "deepspeed",
    "debug", "skip_memory_metrics", "do_train", "do_eval", "do_predict",
    "resume_from_checkpoint", "local_rank")

# TRL (github.com/huggingface/trl @ f2cd577) trl/trainer/sft_config.py SFTConfig's own fields
SFT_CONFIG = (
    "model_init_kwargs", "chat_template_path", "dataset_text_field", "dataset_kwargs",
    "dataset_num_proc", "eos_token", "max_length", "truncation_mode", "shuffle_dataset",
    "packing", "packing_strategy", "padding_free", "pad_to_multiple_of", "eval_packing",
    "completion_only_loss", "assistant_only_loss", "loss_type", "activation_offloading",
    "pad_token",
    # the name max_length had before TRL #2947 (commit caba04da4; removed in #3704)
    "max_seq_length")

# TRL @ f2cd577 trl/trainer/model_config.py ModelConfig: what SFT scripts' YAML carries
MODEL_CONFIG = (
    "model_name_or_path", "model_revision", "dtype", "attn_implementation", "use_peft",
    "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "lora_target_parameters",
    "lora_modules_to_save", "lora_task_type", "use_rslora", "use_dora", "load_in_8bit",
    "load_in_4bit", "bnb_4bit_quant_type", "use_bnb_nested_quant", "bnb_4bit_quant_storage",
    "trust_remote_code", "torch_dtype")   # torch_dtype: ModelConfig's name before dtype

# TRL @ f2cd577 trl/scripts/utils.py ScriptArguments / DatasetMixtureConfig, and the TRL CLI's
# ``env`` table (examples/cli_configs/example_config.yaml)
SCRIPT_ARGUMENTS = (
    "dataset_name", "dataset_config", "dataset_train_split", "dataset_test_split",
    "dataset_streaming", "ignore_bias_buffers", "datasets", "streaming", "test_split_size",
    "env")

# Keys that say the file is TRL's (its defaults then apply: bf16 and gradient checkpointing on)
TRL_ONLY = SFT_CONFIG + MODEL_CONFIG + SCRIPT_ARGUMENTS

# Keys recipes carry that change neither memory nor step time: read and listed as ignored, not
# refused (issue 52). Each with where it is defined:
# - transformers 4.57.1 training_args.py TrainingArguments fields that 5.25 dropped (the recipes
#   people publish were written for 4.x): output and logging, evaluation-only and TPU/SageMaker
#   settings, the learning-rate warmup share, the apex/amp choice of fp16 (same memory);
#   per_gpu_eval_batch_size is evaluation's. (4.57's per_gpu_train_batch_size, no_cuda,
#   fsdp_min_num_params, fsdp_transformer_layer_cls_to_wrap, adafactor, torchdynamo and
#   group_by_length do change the run and stay refused.)
TRANSFORMERS_4_IGNORED = (
    "overwrite_output_dir", "warmup_ratio", "logging_dir", "save_safetensors",
    "per_gpu_eval_batch_size", "use_mps_device", "jit_mode_eval", "fp16_opt_level",
    "half_precision_backend", "fp16_backend", "tpu_num_cores", "tpu_metrics_debug",
    "past_index", "use_legacy_prediction_loop", "include_inputs_for_metrics",
    "push_to_hub_model_id", "push_to_hub_organization", "push_to_hub_token", "mp_parameters",
    "ray_scope", "include_tokens_per_second")
# - huggingface/alignment-handbook @227deaa6 src/alignment/configs.py ModelArguments,
#   DataArguments and SFTConfig additions (chat template, dataset mixer and splits,
#   preprocessing, revisions); huggingface/open-r1 @1416fa0c src/open_r1/configs.py
#   ScriptArguments.dataset_mixture (its DatasetMixtureConfig: which datasets, in what share)
RECIPE_IGNORED = (
    "base_model_revision", "model_code_revision", "tokenizer_name_or_path", "chat_template",
    "dataset_mixer", "text_column", "dataset_splits", "dataset_configs",
    "preprocessing_num_workers", "truncation_side", "auto_insert_empty_system_msg",
    "hub_model_revision", "dataset_mixture")
IGNORED = TRANSFORMERS_4_IGNORED + RECIPE_IGNORED
