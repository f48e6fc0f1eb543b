"""``python -m mooncake.cli_bench``: the reference's module for the ``transfer_engine_bench``
command. It runs the bundled Transfer Engine benchmark in this process's place (exec), every
argument passed through."""

from mooncake.cli import mooncake_transfer_bench as main

__all__ = ["main"]

if __name__ == "__main__":
    main()  # execs the program: it never returns
