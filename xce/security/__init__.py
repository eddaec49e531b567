"""Who may do what: tokens (auth), roles and permissions (policy), the daemon tier's CURVE
keys (curve) and the append-only request logs (auditlog).
"""
