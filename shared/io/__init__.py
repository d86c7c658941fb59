"""I/O: Kafka and Redis clients and their security settings, embedded servers, the
knowledge base's keys, the id ledger, envelopes."""
