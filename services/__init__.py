"""The MAPE services. Each is a thin faust-streaming app around a pure core in its
package (``core.py``), so a service can be swapped for any process that honours the topic
contracts in ``elastic_sps.contracts`` and the Redis layout in ``elastic_sps.io.knowledge_base``."""
