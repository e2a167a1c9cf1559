"""Token-in/token-out (TITO): the agent keeps token ids, never re-tokenizes history.

Modules:
  tokenizer    load a tokenizer (directory, tokenizer.json, "qwen3", HF id) + its chat template
  template     render chat templates the way Hugging Face does (sandboxed jinja2)
  state        append-only token state: ids, loss mask and logprobs kept aligned
  observation  fixed-base observation tokenization with stop-token overlap handling
  parsing      tool-call and <think> parsing of raw completion text
  client       /v1/completions client with token-id prompts and classified errors
  trajectory   trajectory records and ATIF export
  verify       template / replay / live consistency checks
"""
