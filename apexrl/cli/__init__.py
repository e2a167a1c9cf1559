"""The apexrl command line: thin Typer modules that parse, call, render."""
