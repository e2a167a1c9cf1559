"""OCI distribution client: references and digests, auth (Docker config, env,
bearer tokens, ECR via boto3), push and pull of image archives."""
