"""One trial: a task attempted once (sandbox + agent + engine + grading)."""
