"""The rate-limited, deduplicating, delaying workqueue (client-go's ``util/workqueue``) and its
rate limiters.
"""
