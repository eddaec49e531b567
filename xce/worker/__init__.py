"""Running and measuring jobs on a worker host: runner.Runner launches and tracks, measure meters."""
