"""`xce sim`: replay a workload trace through the daemons' own pure core, policy by policy.

    swf.py       reading Standard Workload Format traces
    model.py     the stated model: hosts as groupings of processors, each job's memory curve
    policies.py  named policies (memory views of accounting.py, ordering stages of placement.py)
    engine.py    the discrete-event loop on a virtual clock: ClusterState, Live, placement.schedule
    metrics.py   the figures of a replay and of the trace's own record
    report.py    the terminal table, JSON, PNG plots and one self-contained HTML page
    cli.py       the `xce sim` subcommand

Nothing here holds a rule of its own: when a policy changes, the daemons and the
simulator change together (docs/simulation.md).
"""
