"""spawnml in the browser: ``spawnml export-web`` and a headless-Chromium harness."""

from .export import export_web

__all__ = ["export_web"]
