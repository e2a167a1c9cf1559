"""Inference engines behind the OpenAI-compatible `/v1/completions` contract.

local  a CPU engine for small Hugging Face checkpoints (transformers on torch,
       extra `local`), used by tests and laptop runs; same HTTP contract as vLLM.
"""
