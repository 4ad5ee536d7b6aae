"""Functions outside the kernel language; each test decorates one and checks the error."""

# ruff: noqa
from spawnml.kernel import Output, Tensor, static_range


def scatter_write(x: Tensor, out: Output):
    x[0] = 1.0
    return 0.0


def while_loop(x: Tensor, out: Output):
    i = 0
    while i < 3:
        i += 1
    return 0.0


def python_call(x: Tensor, out: Output):
    return print(x.flat[0])


def attribute_call(x: Tensor, out: Output):
    return x.sum()


def lambda_use(x: Tensor, out: Output):
    f = lambda v: v
    return 0.0


def no_annotation(x, out: Output):
    return 0.0


def two_outputs(x: Tensor, out: Output, out2: Output):
    return 0.0


def string_constant(x: Tensor, out: Output):
    s = "hello"
    return 0.0


def break_stmt(x: Tensor, out: Output):
    for i in range(3):
        break
    return 0.0


def list_literal(x: Tensor, out: Output):
    a = [1, 2]
    return 0.0


def comprehension(x: Tensor, out: Output):
    a = sum(v for v in range(3))
    return 0.0


def try_block(x: Tensor, out: Output):
    try:
        return 0.0
    except Exception:
        return 1.0


def unknown_attribute(x: Tensor, out: Output):
    return x.data


def bare_return(x: Tensor, out: Output):
    return


def import_inside(x: Tensor, out: Output):
    import math

    return 0.0


# -- type errors (found at specialisation)
def mixed_types(x: Tensor, out: Output):
    return x.flat[out.flat] + out.flat


def int_true_division(x: Tensor, out: Output):
    return out.flat / 2


def missing_return(x: Tensor, out: Output):
    if x.flat[out.flat] > 0.0:
        return 1.0


def non_bool_condition(x: Tensor, out: Output):
    if out.flat:
        return 1.0
    return 0.0


def wrong_rank(x: Tensor, out: Output):
    return x[out.flat]


def runtime_tuple_index(x: Tensor, out: Output):
    return x.shape[out.flat]


def returns_wrong_type(x: Tensor, out: Output):
    return out.flat


def runtime_static_range(x: Tensor, out: Output):
    acc = 0.0
    for i in static_range(out.flat):
        acc += 1.0
    return acc


def assign_loop_var(x: Tensor, out: Output):
    for i in range(3):
        i = 2
    return 0.0
