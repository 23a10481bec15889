"""The runtime: the harness (entry points), the pipeline (the ten stages, in order), the
stage functions, the registry of compiled tool entries, approvals, grants, the envelope and
the request/invocation values every stage passes on."""
