"""xce-top: the live operator console.

    receiver thread (live.py) ──┐            ┌── RowTable (table.py): hosts, jobs
    replay player (replay.py) ──┼─> Sync ─> ConsoleModel ─┼── HeaderBar (header.py)
                                │ (xce/follow) (model.py)  └── detail screens (detail.py)
    recorder (record.py) <──────┘

A background feed (the receiver subscribes to the controller's event stream
*first*, then snapshots, and re-snapshots on any gap or epoch change) or a replay
of a recording drives ``Sync``, which applies messages to the pure data model.
A 4 Hz timer in the App takes the model's changes and re-renders only what
changed.  Accounting is never recomputed here: figures come from xce.core.views
through the model's Mirror.
"""
