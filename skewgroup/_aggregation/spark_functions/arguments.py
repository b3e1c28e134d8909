"""The error a refused aggregate call raises, and the check of a call's arguments that every
family of ``spark_functions`` runs first."""


class UnsupportedFunction(TypeError):
    """A Spark aggregate (or an argument type of it) whose semantics ``spark_functions`` cannot keep."""


def expect(function, arg_types, params, n_args, max_params=0):
    """Refuse a call of ``function`` without ``n_args`` column arguments or with more than
    ``max_params`` literal parameters."""
    if len(arg_types) != n_args:
        raise UnsupportedFunction(f"{function} takes {n_args} column argument(s); "
                                  f"got {len(arg_types)} ({arg_types}).")
    if len(params) > max_params:
        raise UnsupportedFunction(f"{function} takes at most {max_params} literal parameter(s); "
                                  f"got {params!r}.")
