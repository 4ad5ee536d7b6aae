# ruff: noqa
from spawnml.kernel import Output, Tensor, helper, kernel


@helper
def ping(v):
    return pong(v)


@helper
def pong(v):
    return ping(v)


@kernel
def recursive(x: Tensor, out: Output):
    return ping(x.flat[out.flat])
