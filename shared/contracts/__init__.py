"""Versioned JSON records of every Kafka topic, one module per contract.

Both ends validate: producers build the pydantic model, consumers ``decode`` bytes and get
the model or a ``ContractError`` whose message is the dead-letter reason.
"""

from elastic_sps.contracts.base import ContractError, Record, decode, encode

__all__ = ["ContractError", "Record", "decode", "encode"]
