"""vLLM's answers at the context window's edge, for the engines that stand in for it.

Measured on vLLM 0.32 (`/v1/completions`, token-id prompts), checked in this order:
  prompt longer than the window   400 "This model's maximum context length is ..."
  max_tokens > the window         400 "max_tokens=N cannot be greater than max_model_len=W"
  prompt + max_tokens > window    max_tokens trimmed silently to what is left: the
                                  completion ends with finish_reason "length"
  nothing left (prompt == window, or max_tokens < 1)
                                  400 "max_tokens must be at least 1, got 0."
"""

from __future__ import annotations


class WindowError(ValueError):
    """A request vLLM refuses with HTTP 400; the message is vLLM's."""


def window_max_tokens(max_tokens: object, n_prompt: int, window: int) -> int:
    """The max_tokens vLLM would run the request with, or WindowError."""
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise WindowError("max_tokens must be an integer")
    if n_prompt > window:
        raise WindowError(
            f"This model's maximum context length is {window} tokens. However, your prompt "
            f"contains {n_prompt} input tokens, which exceeds this limit even without any "
            "output tokens. Please reduce the length of the input prompt."
        )
    if max_tokens > window:
        raise WindowError(
            f"max_tokens={max_tokens} cannot be greater than max_model_len={window}. "
            "Please request fewer output tokens."
        )
    max_tokens = min(max_tokens, window - n_prompt)
    if max_tokens < 1:
        raise WindowError(f"max_tokens must be at least 1, got {max_tokens}.")
    return max_tokens
