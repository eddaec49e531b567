"""ZeroMQ plumbing: sockets with their CURVE and size options, the local door, and the
leader-following request connection.
"""
