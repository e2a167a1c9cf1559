"""Expert task data: APEX reader, Harbor task writer, pack/unpack, validate, split."""
