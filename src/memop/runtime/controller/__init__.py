"""Controllers: the builder, event handlers and predicates, reconcile requests and results, the
workers, expectations, status writes and :class:`ControllerDefinition`. Import names from
:mod:`memop.runtime`.
"""
