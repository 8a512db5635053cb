"""Settings of the memory core.

They are pydantic models so that the bridge's config loader can validate them with key paths in
errors, but the memory package itself only reads plain attributes: it can be used without YAML.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

_TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class StrictSettings(BaseModel):
    """Unknown keys are errors: a typo in config.yaml must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object, info: ValidationInfo) -> object:
        """``${VAR:-}`` with VAR unset gives "": for an optional key that means "not set"."""
        field = cls.model_fields.get(info.field_name or "")
        if value == "" and field is not None and field.default is None:
            return None
        return value


class EmbeddingSettings(StrictSettings):
    provider: Literal["local", "openai", "none"] = "local"
    local_model: Literal["use-v3", "e5-small"] = "use-v3"
    base_url: str | None = None
    api_key: str | None = None
    model: str = "text-embedding-3-small"
    batch_size: int = Field(default=256, ge=1, le=8192)
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)


class DreamSettings(StrictSettings):
    enabled: bool = True
    time: str = "23:50"
    jitter_minutes: int = Field(default=5, ge=0, le=120)
    lookback_days: int = Field(default=1, ge=1, le=30)
    max_entries: int = Field(default=50, ge=1, le=1000)
    max_loss: float = Field(default=0.5, ge=0.0, le=1.0)

    @field_validator("time")
    @classmethod
    def _check_time(cls, value: str) -> str:
        if not _TIME_RE.match(value):
            raise ValueError(f"must be HH:MM in 24-hour time, got {value!r}")
        return value


class VersionSettings(StrictSettings):
    """How many MEMORY.md versions the nightly pass keeps per scope; the newest is always kept."""

    keep: int = Field(default=50, ge=1, le=100000)
    max_days: int = Field(default=365, ge=1, le=36500)


class RetentionSettings(StrictSettings):
    """How long daily memory is kept; None (the default) keeps it for good."""

    daily_days: int | None = Field(default=None, ge=1, le=36500)


class VectorStoreSettings(StrictSettings):
    """Where LanceDB keeps the vectors: ``<workspace>/vectors`` unless ``uri`` names an absolute
    folder or an object store (``s3://bucket/prefix``, ``gs://``, ``az://``). ``storage_options``
    are LanceDB's own (endpoint, region, credentials; ``allow_http`` for a plain-HTTP endpoint)."""

    uri: str | None = None
    storage_options: dict[str, str] = Field(default_factory=dict)

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, value: str | None) -> str | None:
        if value is not None and not is_uri(value) and not value.startswith("/"):
            raise ValueError(f"must be an absolute folder or an object-store URI (s3://bucket/prefix), got {value!r}")
        return value


def is_uri(location: str) -> bool:
    """Whether ``location`` names an object store (``scheme://...``) rather than a local folder."""
    return _URI_RE.match(location) is not None


class RerankSettings(StrictSettings):
    """An optional cross-encoder behind the ``/rerank`` HTTP contract (Cohere, Jina, TEI, Infinity,
    vLLM); ``base_url`` None (the default) leaves it off. See :mod:`memory.retrieval.rerank`."""

    base_url: str | None = None
    api_key: str | None = None
    model: str = ""
    top_n: int = Field(default=20, ge=1, le=200)
    timeout_s: float = Field(default=3.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL (the part before /rerank), got {value!r}")
        return value


class AutoRecallSettings(StrictSettings):
    """What is searched and put before the model by itself each turn (memory.retrieval.recall)."""

    enabled: bool = True
    max_chars: int = Field(default=1500, ge=100, le=20000)
    min_relevance: float = Field(default=0.3, ge=0.0, le=1.0)
    max_results: int = Field(default=5, ge=1, le=20)


class MemorySettings(StrictSettings):
    scope: Literal["user", "global"] = "user"
    vector_weight: float = Field(default=0.7, ge=0.0, le=1.0)
    keyword_weight: float = Field(default=0.3, ge=0.0, le=1.0)
    coverage_weight: float = Field(default=0.05, ge=0.0, le=1.0)
    half_life_days: float = Field(default=90.0, gt=0)
    recency_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    now_recency_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    time_weight: float = Field(default=1.0, ge=0.0, le=10.0)
    candidates: int = Field(default=40, ge=1, le=1000)
    min_score: float = Field(default=0.1, ge=0.0, le=1.0)
    weak_below: float = Field(default=0.25, ge=0.0, le=1.0)
    max_results: int = Field(default=8, ge=1, le=100)
    chunk_max_chars: int = Field(default=800, ge=64, le=20000)
    chunk_overlap_lines: int = Field(default=2, ge=0, le=50)
    ann_threshold: int = Field(default=20000, ge=256)
    vector_cache_mb: int = Field(default=512, ge=0, le=65536)
    embed_cache_grace_days: int = Field(default=7, ge=1, le=3650)
    versions: VersionSettings = Field(default_factory=VersionSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    dream: DreamSettings = Field(default_factory=DreamSettings)
    auto_recall: AutoRecallSettings = Field(default_factory=AutoRecallSettings)
    vectors: VectorStoreSettings = Field(default_factory=VectorStoreSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
