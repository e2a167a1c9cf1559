"""The sampling defaults, declared once (light: no imports).

An engine request's sampling fields when nobody sets them: the request the agent builds
(apexrl.tito.client), the trial's `Sampling` (apexrl.trial.config), `apexrl eval run`'s
`--temperature/--top-p/--top-k/--min-p`, a recipe's `algorithm.temperature`, `apexrl tito
verify --live`, and what the CPU engine assumes when a request leaves a field out (as
vLLM does). top_k -1 and min_p 0 turn both off, as the recipe sends them.
"""

from __future__ import annotations

TEMPERATURE = 1.0
TOP_P = 1.0
TOP_K = -1
MIN_P = 0.0
