"""What the bridge does with the files a message brings: voice notes, audio, photos and documents.

A channel only says what came (an :class:`~channels.Attachment`, fetched when read); here each kind
becomes text the agent and memory understand, or a clear answer why it did not.
"""

from .intake import MediaIntake, Prepared

__all__ = ["MediaIntake", "Prepared"]
