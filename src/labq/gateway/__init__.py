"""The HTTP plumbing the API and the web UI share: the app's state and its FastAPI
dependencies (:mod:`~labq.gateway.deps`), who is calling (:mod:`~labq.gateway.auth`),
the one error shape and the translation of domain errors into it
(:mod:`~labq.gateway.errors`), the strict request models forms validate with
(:mod:`~labq.gateway.schemas`, :mod:`~labq.gateway.bodies`), and a write transaction
whose scheduler events are posted after its commit (:mod:`~labq.gateway.posting`). It
imports neither ``labq.api`` nor ``labq.web``.
"""
