"""Admission and conversion webhooks: what a controller package declares, and the HTTPS server
the manager runs to answer the API server's ``AdmissionReview`` and ``ConversionReview`` calls.

:mod:`memop.runtime.webhook.declarations` holds the declarations a controller package gives in
its :class:`~memop.runtime.controller.definition.ControllerDefinition` (``webhooks=``,
``conversions=``); manifest generation reads the same declarations to write the webhook
configurations, the Service and the CRDs' conversion stanzas.

Serving them: :mod:`~memop.runtime.webhook.server` (the HTTPS server, its certificate reloads and
readiness), :mod:`~memop.runtime.webhook.admission` (AdmissionReviews: patches, denials, 400s),
:mod:`~memop.runtime.webhook.conversion` (ConversionReviews through the hub) and
:mod:`~memop.runtime.webhook.metrics` (controller-runtime's ``controller_runtime_webhook_*``).
The manager starts the server on every replica when a running controller declares any.
"""
