"""Policies as code: the policy file's schema and rules (``model``, pure) and reading it (``load``).

See docs/policies.md for the file and its meaning.
"""
