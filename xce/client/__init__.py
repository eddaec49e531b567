"""xce.client: the Python scripting API over ZeroMQ (also what the CLI, REST and console use).

    from xce.client import Client
    with Client() as c:                       # finds a local `xce up` by itself
        ids = c.submit_many([{"command": ["true"], "resreq": "rusage[mem=10]"}] * 100)
        c.wait(ids)

``api`` holds the Client; ``follow`` the one reader of the event stream.
"""

from xce.client.api import (
    CLUSTER_FILE,
    Client,
    Connection,
    cluster_config,
    endpoints_of,
    make_spec,
    unix_user,
)

__all__ = ["CLUSTER_FILE", "Client", "Connection", "cluster_config", "endpoints_of", "make_spec", "unix_user"]
