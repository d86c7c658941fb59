"""The user's pipeline: how operator code is loaded and run (``operators``), what happens
when it raises (``failures``), how a record on the user's topic becomes an event
(``records``) and what an operator costs (``costs``). The dataplane and the ingress run
these; nothing here imports a service."""
