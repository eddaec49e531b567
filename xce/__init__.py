"""XCE: a cluster manager that schedules on reserved-versus-actual memory truth."""

__version__ = "0.1.0"
