"""Small job programs XCE ships for demos, tests and benchmarks."""
