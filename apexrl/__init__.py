"""apexrl: post-training toolchain for knowledge-work agents."""

import os as _os

__version__ = "0.1.0"

# LiteLLM (the rubric judge; Harbor imports it too) fetches its model price map from the
# network at import unless told to use its bundled copy: offline that costs ~8 s of retries
# and several warnings per process. Set here, so every process apexrl starts inherits it.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Its log lines stay out of apexrl's stderr unless `--debug` / APEXRL_DEBUG turns them on.
_os.environ.setdefault("LITELLM_LOG", "DEBUG" if _os.environ.get("APEXRL_DEBUG") else "ERROR")
