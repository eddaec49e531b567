"""The pure core: the domain model, resource requirements, accounting, placement and the
replicated state machine.  No I/O, no clock, no randomness; imports nothing of XCE outside itself.
"""
