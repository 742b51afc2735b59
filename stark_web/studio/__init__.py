"""The Django app of STARK Studio: models, API, pages, websockets and the service that runs searches through RQ.

It lives in the web layer: it may import search/ and kernels/, which never import it or Django
([tool.importlinter] in pyproject.toml).
"""
