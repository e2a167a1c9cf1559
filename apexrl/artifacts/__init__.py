"""Artifact records (pydantic) and their JSONL / Parquet I/O."""
