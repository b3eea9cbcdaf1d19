"""vmware-pilot: plan, review, approve, run and roll back multi-step VMware operations."""

__version__ = "3.1.0.dev0"

__all__ = ["__version__"]
