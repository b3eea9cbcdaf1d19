"""vmware-pilot: plan, review, approve, run and roll back multi-step VMware operations."""

__version__ = "3.0.0"

__all__ = ["__version__"]
