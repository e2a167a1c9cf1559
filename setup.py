"""The one compiled part of apexrl: the tar fast paths (apexrl/artifacts/_fasttar.c).

Everything else is declared in pyproject.toml. apexrl works without the extension
(archive.py and tasks/pack.py fall back to their Python code), but `make install` builds it and
tests/test_fasttar.py checks that it is there.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
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
        )
    ]
)
