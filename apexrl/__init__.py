"""apexrl: post-training toolchain for knowledge-work agents."""

__version__ = "0.1.0"
