"""The daemons: thin shells of sockets, clocks and processes around the pure core."""
