"""Private support of :mod:`mooncake.mooncake_store_service` (the store's REST front end).

Only the service imports this package. :func:`require` checks that the ``service`` extra's packages
are installed and, when one is not, raises an ImportError that names the extra to install, so that
``import mooncake`` and the core wheel never need them.
"""

import importlib

__all__ = ["SERVICE_EXTRA_PACKAGES", "require"]

# Import name -> distribution name of what the ``service`` extra installs (pyproject.toml).
SERVICE_EXTRA_PACKAGES = {"starlette": "starlette", "uvicorn": "uvicorn"}


def require(user: str) -> None:
    """Imports every package of the ``service`` extra, or raises ImportError naming the extra.

    ``user`` is the module that needs them, for the message."""
    missing = []
    for module, dist in SERVICE_EXTRA_PACKAGES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(dist)
    if missing:
        raise ImportError(
            f"{user} needs the 'service' extra, which is not installed (missing: "
            f"{', '.join(missing)}). Install it with: pip install 'mooncake-c[service]'",
            name=missing[0])
