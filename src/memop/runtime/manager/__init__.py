"""The manager: runs controllers once caches are synced and this replica leads; health and
metrics server (with authentication), Events, process tuning.
"""
