"""The ``mc_store_rest_server`` console script: the service, or, when the ``service`` extra is not
installed, one line saying how to install it (exit status 2) instead of a traceback.
``--version`` is answered either way: it needs only the package."""

import sys


def main():
    if sys.argv[1:] == ["--version"]:
        from mooncake import __version__

        print(f"mc_store_rest_server {__version__}")
        raise SystemExit(0)
    try:
        from mooncake.mooncake_store_service import sync_main
    except ImportError as exc:
        if "'service' extra" not in str(exc):
            raise
        print(f"mc_store_rest_server: {exc}", file=sys.stderr)
        raise SystemExit(2)
    sync_main()
