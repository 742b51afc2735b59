"""The Django app of STARK Studio: models, API, pages, websockets and the service that runs searches through RQ.

Everything under search/app/ may import Django; nothing else under search/ may (ruff banned-api, see pyproject.toml).
"""
