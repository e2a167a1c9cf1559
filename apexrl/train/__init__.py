"""Training: recipes (recipe.py), rules and SkyRL rendering (render.py, skyrl_keys.py),
the KV-cache planner (plan.py), the SkyRL generator over apexrl trials (generator.py),
Ray job launch (launch.py) and the job's entrypoint (entrypoint.py).

Light to import: SkyRL and Ray load only inside the functions that need them.
"""
