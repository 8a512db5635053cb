"""memory.rerank in the configuration: off by default, bad values named by their key, the key a secret."""

from __future__ import annotations

import pytest

from bridge.config import ConfigError, parse_config
from bridge.logs import config_secrets
from memory.config import MemorySettings
from memory.retrieval.rerank import Reranker, make_reranker


def test_settings_default_to_off_and_errors_name_the_key() -> None:
    settings = MemorySettings().rerank
    assert (settings.base_url, settings.api_key, settings.model, settings.top_n, settings.timeout_s) == \
        (None, None, "", 20, 3.0)
    assert make_reranker(settings) is None
    with pytest.raises(ValueError, match=r"memory\.rerank\.base_url is not set"):
        Reranker(settings)
    for bad, says in [({"top_n": 0}, "memory.rerank.top_n: Input should be greater than or equal to 1"),
                      ({"top_n": 201}, "memory.rerank.top_n: Input should be less than or equal to 200"),
                      ({"timeout_s": 0}, "memory.rerank.timeout_s: Input should be greater than 0"),
                      ({"base_url": "gpu:8080"}, "memory.rerank.base_url: Value error, must be an http:// or https://"),
                      ({"top_k": 5}, "memory.rerank.top_k")]:
        with pytest.raises(ConfigError) as refused:
            parse_config({"memory": {"rerank": bad}})
        assert says in str(refused.value)
    assert parse_config({"memory": {"rerank": {"base_url": ""}}}).memory.rerank.base_url is None  # ${VAR:-}


def test_the_api_key_is_redacted_from_logs_like_every_secret() -> None:
    config = parse_config({"memory": {"rerank": {"base_url": "http://gpu:8080", "api_key": "sk-rerank-abcdef"}}})
    assert "sk-rerank-abcdef" in config_secrets(config)
