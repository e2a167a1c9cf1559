"""Inference engines behind the OpenAI-compatible `/v1/completions` token-id contract.

vllm      vLLM's OpenAI-compatible server as a managed subprocess (GPU, extra `serve`):
          command line with the flags TITO needs, health wait, log file, clean stop
local     a CPU engine for small Hugging Face checkpoints (transformers on torch,
          extra `local`), used by tests and laptop runs; same HTTP contract as vLLM
serve     choose/start an engine (`apexrl engine serve`), probe a running one
          (`--endpoint URL`), `open_engine` (eval starts its engine there)
registry  ENGINES: name -> launch function and needs (CLI choices, doctor, preflight)
protocol  the Engine interface (start, stop, endpoint, health, capabilities) and
          StartOptions

The tests' scripted engine (fixed completions plus faults) lives in
tests/scripted_engine.py and is registered by tests/conftest.py.
"""
