"""JSON Schema as catalogs really write it: dialects normalized to 2020-12
(`dialects.normalize_schema`), foreign type names, the notes a rewrite leaves, values that
satisfy a schema, and the JSON document primitives every package shares (`document`: JSON
Pointer, local `$ref`, canonical JSON).

Nothing is imported here, so `toolkeeper.schema.document` stays importable from the contract
model that `dialects` itself builds on.
"""
