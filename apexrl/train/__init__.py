"""Training: recipes (recipe.py), recipe rules (rules.py), SkyRL configuration
(skyrl_config.py, skyrl_keys.py), the run spec and its plan (render.py), the KV-cache
planner (plan.py), the SkyRL generator over apexrl trials (generator.py),
Ray job launch (launch.py) and the job's entrypoint (entrypoint.py).

Light to import: SkyRL and Ray load only inside the functions that need them.
"""
