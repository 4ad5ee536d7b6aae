"""An example third-party spawnml op plugin: ``com.example::Swish``."""

from .swish import DOMAIN, Swish

__all__ = ["DOMAIN", "Swish"]
