"""Files copied verbatim into every task directory (run inside the sandbox)."""
