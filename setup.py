"""The one compiled part of apexrl: the plain-tar fast path (apexrl/artifacts/_untar.c).

Everything else is declared in pyproject.toml. apexrl works without the extension
(archive.py falls back to its Python extractor), but `make install` builds it and
tests/test_untar_native.py checks that it is there.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "apexrl.artifacts._untar",
            sources=["apexrl/artifacts/_untar.c"],
            libraries=["z"],  # zlib1g-dev: inflate of task binaries inside the C call
            extra_compile_args=["-O2", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra"],
        )
    ]
)
