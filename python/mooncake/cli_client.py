"""``python -m mooncake.cli_client``: the reference's module for the ``mooncake_client`` command.
It runs the bundled storage node in this process's place (exec, so the pid a caller holds is the
node's and signals reach it), every argument passed through."""

from mooncake.cli import mooncake_client as main

__all__ = ["main"]

if __name__ == "__main__":
    main()  # execs the program: it never returns
