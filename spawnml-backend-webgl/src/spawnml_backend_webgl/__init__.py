"""spawnml's webgl backend.

GLSL ES 3.00 shaders on an OpenGL ES 3.0 context (the WebGL2 feature set).
"""

from .backend import WebGLBackend

__all__ = ["WebGLBackend"]
