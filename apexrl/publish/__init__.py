"""Publishing to the Hugging Face Hub: checkpoints, eval traces, task datasets.

Every publish goes through the same steps: stage (check the input, redact every
text file that will leave the machine, write the card) into a `Plan`, then
`hub.upload` (create the repo, skip files already on the Hub, upload the rest in
a few large commits, verify the remote file list and sizes). `--dry-run` stops
after staging and prints the plan.
"""
