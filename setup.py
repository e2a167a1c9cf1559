"""The one compiled part of apexrl: the tar fast paths (apexrl/artifacts/_fasttar.c), and the
files a wheel carries from outside the package folder (recipes, shell completions).

Everything else is declared in pyproject.toml. The extension is optional: without a C compiler
or zlib's headers the build warns and goes on, and apexrl runs its Python code (archive_extract.py,
tasks/pack.py and envs/local/environment.py fall back; `apexrl doctor` says which runs).
APEXRL_PURE_PYTHON=1 leaves it out altogether: `make wheel` builds the py3-none-any wheel so.
"""

import os
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

PURE = os.environ.get("APEXRL_PURE_PYTHON", "") not in ("", "0")

FASTTAR = Extension(
    "apexrl.artifacts._fasttar",
    sources=["apexrl/artifacts/_fasttar.c"],
    libraries=["z"],  # zlib1g-dev: inflate of task binaries inside the C call
    extra_compile_args=[
        "-O2",
        "-std=c11",
        "-D_GNU_SOURCE",
        "-Wall",
        "-Wextra",
        "-Wno-format-truncation",
    ],
    optional=True,  # a failed compile or link warns; the wheel then runs the Python code
)

# Shipped recipes (`apexrl train --recipe smoke-cpu`) live in recipes/ at the top of the
# repository; an installed apexrl finds them in its package as apexrl/recipes/
# (apexrl.train.recipe.RECIPES_DIR looks there first).
RECIPES = Path("recipes")


class BuildPy(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return  # an editable install reads recipes/ from the tree
        for src in sorted(RECIPES.rglob("*.toml")):
            dst = Path(self.build_lib) / "apexrl" / src
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


setup(
    ext_modules=[] if PURE else [FASTTAR],
    cmdclass={"build_py": BuildPy},
    # completions for a prefix's shells (a venv's share/ when installed into one)
    data_files=[
        ("share/bash-completion/completions", ["completions/apexrl"]),
        ("share/zsh/site-functions", ["completions/_apexrl"]),
        ("share/fish/vendor_completions.d", ["completions/apexrl.fish"]),
    ],
)
