"""Ready-made policies, installed as hooks on a runtime."""

from ._timeout import install_timeout_policy

__all__ = ["install_timeout_policy"]
