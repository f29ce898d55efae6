"""Admission and conversion webhooks: what a controller package declares, and the HTTPS server
the manager runs to answer the API server's ``AdmissionReview`` and ``ConversionReview`` calls.

:mod:`memop.runtime.webhook.declarations` holds the declarations a controller package gives in
its :class:`~memop.runtime.controller.definition.ControllerDefinition` (``webhooks=``,
``conversions=``); manifest generation reads the same declarations to write the webhook
configurations, the Service and the CRDs' conversion stanzas.
"""
