"""Copies of cluster state kept from the wire: the leader's soft state (Live), a mirror kept
from snapshot + events (Mirror), and the invariant audit over them.  Pure: no sockets.
"""
