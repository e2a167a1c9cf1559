"""Mercor's archipelago as a peer: build its MCP servers' runtimes from a checkout the
user names, run them beside apexrl's own servers, and compare what both return.

Nothing of archipelago is part of apexrl: a checkout is found at run time
(`--peer DIR`, else $APEXRL_ARCHIPELAGO, else the one `apexrl peer fetch` cloned into
apexrl's cache: apexrl.artifacts.archipelago_cache), and its runtimes are built with uv into a
folder keyed by the checkout's content (`runtime`)."""
