"""Connection security for Kafka and Redis, from ``SPS_KAFKA_*`` and ``SPS_REDIS_*``.

Every Kafka and Redis client of the project is built through ``kafka_config`` /
``elastic_sps.io.redis_client.redis_client``, so one set of variables secures them all, the
Spark executors' clients included (the dataplane forwards these variables to them).
Modelled on quixstreams' ``ConnectionConfig``: librdkafka's own option names, secrets as
``SecretStr`` (shown as ``**********`` in any repr or log), one method per client kind.
"""

from __future__ import annotations

import ssl
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class KafkaSecurity(BaseSettings):
    """``SPS_KAFKA_SECURITY_PROTOCOL=SASL_SSL``, ``SPS_KAFKA_SASL_USERNAME``, … ."""

    model_config = SettingsConfigDict(env_prefix="SPS_KAFKA_", extra="ignore")

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="Every Kafka client's security.protocol."
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        default="PLAIN", description="sasl.mechanism with a SASL protocol."
    )
    sasl_username: str | None = Field(default=None, description="SASL user name.")
    sasl_password: SecretStr | None = Field(default=None, description="SASL password (secret).")
    ssl_ca_location: str | None = Field(default=None, description="CA certificate file (TLS).")
    ssl_certificate_location: str | None = Field(
        default=None, description="Client certificate file (mutual TLS)."
    )
    ssl_key_location: str | None = Field(default=None, description="Client key file.")
    ssl_key_password: SecretStr | None = Field(
        default=None, description="The client key's password (secret)."
    )

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> KafkaSecurity:
        if self.sasl and not (self.sasl_username and self.sasl_password):
            raise ValueError(
                f"security_protocol {self.security_protocol} needs "
                "SPS_KAFKA_SASL_USERNAME and SPS_KAFKA_SASL_PASSWORD"
            )
        return self

    def librdkafka(self) -> dict[str, str]:
        """confluent-kafka's (librdkafka's) options; empty for PLAINTEXT."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        conf: dict[str, str] = {"security.protocol": self.security_protocol}
        if self.sasl:
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_username or ""
            conf["sasl.password"] = _reveal(self.sasl_password)
        for key, value in (
            ("ssl.ca.location", self.ssl_ca_location),
            ("ssl.certificate.location", self.ssl_certificate_location),
            ("ssl.key.location", self.ssl_key_location),
            ("ssl.key.password", _reveal(self.ssl_key_password) or None),
        ):
            if self.tls and value:
                conf[key] = value
        return conf

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        ctx = ssl.create_default_context(cafile=self.ssl_ca_location)
        if self.ssl_certificate_location:
            ctx.load_cert_chain(
                self.ssl_certificate_location,
                self.ssl_key_location,
                _reveal(self.ssl_key_password) or None,
            )
        return ctx

    def aiokafka(self) -> dict[str, Any]:
        """aiokafka's keyword arguments (the test and report readers)."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        kw: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.sasl:
            kw |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.sasl_username,
                "sasl_plain_password": _reveal(self.sasl_password),
            }
        if self.tls:
            kw["ssl_context"] = self.ssl_context()
        return kw

    def faust_credentials(self) -> Any:
        """faust's ``broker_credentials`` (None for PLAINTEXT)."""
        import faust

        if self.sasl:
            return faust.SASLCredentials(
                username=self.sasl_username,
                password=_reveal(self.sasl_password),
                mechanism=self.sasl_mechanism,
                ssl_context=self.ssl_context(),
            )
        if self.tls:
            return faust.SSLCredentials(self.ssl_context())
        return None


class RedisSecurity(BaseSettings):
    """``SPS_REDIS_PASSWORD`` (and ``SPS_REDIS_USERNAME`` for an ACL user); TLS by a
    ``rediss://`` URL, with ``SPS_REDIS_SSL_CA_CERTS`` for a private CA. A password in
    the URL works too, but the URL then shows up wherever the URL is printed."""

    model_config = SettingsConfigDict(env_prefix="SPS_REDIS_", extra="ignore")

    username: str | None = Field(default=None, description="Redis ACL user name.")
    password: SecretStr | None = Field(default=None, description="Redis password (secret).")
    ssl_ca_certs: str | None = Field(default=None, description="CA certificates for rediss://.")

    def client_kwargs(self, url: str) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.password is not None:
            kw["password"] = self.password.get_secret_value()
        if self.username:
            kw["username"] = self.username
        if url.startswith("rediss://") and self.ssl_ca_certs:
            kw["ssl_ca_certs"] = self.ssl_ca_certs
        return kw


def _reveal(secret: SecretStr | None) -> str:
    return secret.get_secret_value() if secret is not None else ""


def kafka_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """A confluent-kafka client's configuration: the servers, the security settings from
    the environment, then the caller's own options."""
    return {"bootstrap.servers": bootstrap, **KafkaSecurity().librdkafka(), **extra}
