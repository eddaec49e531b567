"""What this site and this machine say: the TOML configuration, the state directory and the
files a local cluster leaves there.
"""
