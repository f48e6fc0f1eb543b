"""The address-free N-D logical planner of model-weight reshards. Its public names are those of
:mod:`mooncake.reshard.weight.planner`, which imports them from the modules here; this package
re-exports nothing, so that the list of them has one home."""
