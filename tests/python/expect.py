"""The one error-expectation helper of the Python tests: a call must raise `exc` with `needle` in its message."""


def expect_error(test, exc, needle, fn, *args, **kwargs):
    """Asserts that fn(*args, **kwargs) raises `exc` whose message contains `needle`; returns the message."""
    with test.assertRaises(exc) as ctx:
        fn(*args, **kwargs)
    test.assertIn(needle, str(ctx.exception))
    return str(ctx.exception)
