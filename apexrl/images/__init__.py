"""Images: reproducible OCI image archives (`oci`), world image packing (`pack`), and
the OCI distribution client (`registry`: push and pull; `refs`: references and digests;
`auth`: Docker config, env, bearer tokens, ECR via boto3).

Worlds are read by `apexrl.worlds` and packed here; nothing in `apexrl.worlds` imports
this package."""
