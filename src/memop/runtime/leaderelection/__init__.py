"""Leader election: a coordination.k8s.io Lease (client-go's) or leader for life (operator-lib's
ConfigMap lock owned by this replica's Pod).
"""
