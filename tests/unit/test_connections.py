"""Connection security settings: what each client kind receives, and secrets kept out of
reprs and error messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from elastic_sps.io.connections import KafkaSecurity, RedisSecurity, kafka_config

pytestmark = pytest.mark.unit


def test_plaintext_adds_nothing_to_a_client_config(monkeypatch):
    monkeypatch.delenv("SPS_KAFKA_SECURITY_PROTOCOL", raising=False)
    assert kafka_config("k:9092", **{"linger.ms": 5}) == {
        "bootstrap.servers": "k:9092",
        "linger.ms": 5,
    }


def test_sasl_ssl_from_the_environment_reaches_librdkafka(monkeypatch):
    monkeypatch.setenv("SPS_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("SPS_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("SPS_KAFKA_SASL_USERNAME", "sps")
    monkeypatch.setenv("SPS_KAFKA_SASL_PASSWORD", "s3cret")
    monkeypatch.setenv("SPS_KAFKA_SSL_CA_LOCATION", "/etc/ca.pem")
    conf = kafka_config("k:9093")
    assert conf == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "sps",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/ca.pem",
    }


def test_the_password_never_shows_in_a_repr():
    sec = KafkaSecurity(
        security_protocol="SASL_PLAINTEXT", sasl_username="sps", sasl_password="s3cret"
    )
    assert "s3cret" not in repr(sec) and "s3cret" not in str(sec.model_dump())
    assert "s3cret" not in repr(RedisSecurity(password="s3cret"))


def test_sasl_without_credentials_is_refused_naming_the_variables():
    with pytest.raises(ValidationError, match="SPS_KAFKA_SASL_PASSWORD"):
        KafkaSecurity(security_protocol="SASL_SSL", sasl_username="sps")


def test_ssl_without_sasl_sends_no_sasl_options():
    conf = KafkaSecurity(security_protocol="SSL", ssl_ca_location="/ca.pem").librdkafka()
    assert conf == {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"}


def test_redis_ca_only_for_a_tls_url():
    sec = RedisSecurity(password="pw", ssl_ca_certs="/ca.pem")
    assert sec.client_kwargs("redis://h:6379/0") == {"password": "pw"}
    assert sec.client_kwargs("rediss://h:6380/0") == {"password": "pw", "ssl_ca_certs": "/ca.pem"}


def test_a_service_stops_at_start_naming_the_missing_credential(monkeypatch, capsys):
    from elastic_sps.settings import MonitorSettings, settings_or_exit

    monkeypatch.setenv("SPS_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.delenv("SPS_KAFKA_SASL_PASSWORD", raising=False)
    monkeypatch.setenv("SPS_KAFKA_SASL_USERNAME", "sps")
    with pytest.raises(SystemExit) as stop:
        settings_or_exit(MonitorSettings)
    assert stop.value.code == 2
    assert "SPS_KAFKA_SASL_PASSWORD" in capsys.readouterr().err
