"""Python warnings raised while a gallery example runs are errors.

Registered in ``sphinx_gallery_conf["reset_modules"]`` with ``reset_modules_order="both"``:
before each example the warning filters are saved and every warning is made an error (so
a ``ConvergenceWarning``, an ``ALOWarning`` or a deprecation in an example fails the
build, as in the test suite); after it they are restored for Sphinx itself.
"""

from __future__ import annotations

import warnings

#: The filter contexts entered before the examples now running (one at a time).
_contexts: list[warnings.catch_warnings] = []


def strict_warnings(gallery_conf, fname, when):
    """Make warnings errors ``before`` an example; restore the filters ``after`` it."""
    if fname is None:  # entering a gallery directory: no example runs yet
        return
    if when == "before":
        context = warnings.catch_warnings()
        context.__enter__()
        _contexts.append(context)
        warnings.simplefilter("error")
    elif _contexts:
        _contexts.pop().__exit__(None, None, None)
