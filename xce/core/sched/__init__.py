"""The scheduling policy stages of the pure core (docs/scheduling.md).

    order.py      pending work: queue priority -> fairshare -> job priority -> submit
    fairshare.py  share trees, decayed usage folded from hard state, the priority formula
    limits.py     lsb.resources limits: a filter stage whose reasons name the limit
    backfill.py   EASY / conservative reservations, and the veto that keeps them
    preempt.py    a queue preempting lower ones: victims, suspend/requeue/kill, the eviction budget
    holds.py      which stage holds a pending job: the room it waits for, or the order
    site.py       the site's policy from config, and a round's inputs from a cluster's jobs

``xce.core.placement.schedule`` runs them in one round.  Nothing here does I/O or reads a clock;
``xce/security/policy.py`` is the *access* policy, not this.
"""
