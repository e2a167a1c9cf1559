"""Content of the synthetic example dataset (`apexrl tasks example`).

`formats` turns plain Python descriptions into reproducible office files;
`banking`, `law` and `consulting` each build one world and its tasks.
"""
