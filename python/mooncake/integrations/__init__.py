"""``mooncake.integrations``: where adapters between Mooncake and serving frameworks (vLLM,
SGLang, LMCache, ...) live, and how they are found.

Nothing here imports a framework, and ``import mooncake`` never imports this package: a core
install stays free of torch, vLLM and the like.

The convention an adapter follows:

* It is a module ``mooncake.integrations.<name>``, or a module of another distribution that
  announces itself under the entry-point group ``mooncake.integrations``
  (``[project.entry-points."mooncake.integrations"]  myframework = "pkg.adapter"``).
* Its dependencies are one pip extra. At import, before anything else, it calls
  :func:`require_extra` with that extra and the modules it needs, so a missing framework is an
  ImportError that says which extra to install rather than a deep traceback.
* It is loaded explicitly, by import or by :func:`load`; nothing is imported on discovery.

:func:`available` lists what is installed (built-in modules and entry points, without importing
them); :func:`register` adds an adapter at run time (a test, a plug-in loaded by hand).
"""

import importlib
import pkgutil
from dataclasses import dataclass
from importlib.metadata import entry_points

__all__ = ["ENTRY_POINT_GROUP", "Adapter", "available", "load", "register", "require_extra"]

ENTRY_POINT_GROUP = "mooncake.integrations"
_PACKAGE_NAME = "mooncake-c"


@dataclass(frozen=True)
class Adapter:
    """One adapter: its name, the module that implements it and where it was found
    ("builtin", "entry-point" or "registered")."""

    name: str
    module: str
    origin: str


_registered: "dict[str, Adapter]" = {}


def require_extra(user, extra, *modules):
    """Imports each of modules, or raises ImportError naming the extra that installs them.

    ``user`` is what needs them (for the message), ``extra`` the pip extra of this package (or a
    full requirement such as ``"other-dist[x]"``)."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        what = extra if "[" in extra else f"{_PACKAGE_NAME}[{extra}]"
        raise ImportError(f"{user} needs the '{extra}' extra, which is not installed (missing: "
                          f"{', '.join(missing)}). Install it with: pip install '{what}'",
                          name=missing[0])


def _check_name(name):
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"adapter name must be an identifier, not {name!r}")


def register(name, module):
    """Makes ``module`` (a dotted module name, imported only by :func:`load`) the adapter
    called ``name``; a second registration of a name replaces the first."""
    _check_name(name)
    if not isinstance(module, str) or not module or not all(
            p.isidentifier() for p in module.split(".")):
        raise ValueError(f"adapter module must be a dotted module name, not {module!r}")
    _registered[name] = Adapter(name, module, "registered")


def available():
    """Every adapter that could be loaded now, by name: the built-in modules of this package,
    then the entry points of installed distributions, then :func:`register`'s (a later source
    wins for the same name). Nothing is imported."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            found[info.name] = Adapter(info.name, f"{__name__}.{info.name}", "builtin")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.isidentifier():
            found[ep.name] = Adapter(ep.name, ep.value.split(":")[0].strip(), "entry-point")
    found.update(_registered)
    return dict(sorted(found.items()))


def load(name):
    """Imports the adapter called name and returns its module.

    KeyError (listing what exists) for an unknown name; the adapter's own ImportError (naming its
    extra, by the convention above) when its framework is not installed."""
    _check_name(name)
    adapters = available()
    if name not in adapters:
        raise KeyError(f"no Mooncake integration {name!r}; available: "
                       f"{', '.join(adapters) or 'none'}")
    return importlib.import_module(adapters[name].module)
