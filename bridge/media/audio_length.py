"""How long a recording is, read from the file itself when the channel did not say.

Telegram reports a voice note's length, and Slack an audio clip's; a file sent as a document, a
Slack upload without ``duration_ms`` or a terminal ``/attach`` carry none. ``speech.max_seconds``
must hold for those too, so the length is read from the file's own headers with mutagen (MP3,
MP4/M4A, Ogg Vorbis/Opus/FLAC, FLAC, WAV, AIFF and more), which reads headers and frame tables and
never decodes the sound. A format mutagen does not read (WebM, say) is bounded by
``speech.max_bytes`` alone.
"""

from __future__ import annotations

import io
import logging

log = logging.getLogger(__name__)


def measured_seconds(data: bytes) -> float | None:
    """The length in seconds that ``data``'s headers state, or None when they state none that
    mutagen can read. Blocking (it parses the file): call it off the event loop."""
    import mutagen

    try:
        found = mutagen.File(io.BytesIO(data))
    except Exception as exc:  # mutagen raises many kinds on a damaged or hostile file
        log.debug("audio length unreadable: %s", exc)
        return None
    length = getattr(getattr(found, "info", None), "length", None)
    return float(length) if isinstance(length, int | float) and length > 0 else None
