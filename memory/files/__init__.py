"""The workspace on disk: scopes and their folders, atomic writes, locks, MEMORY.md and its versions.

Everything that writes a memory file goes through here; line removal is shared with the forget paths.
May import ``config`` and, for MEMORY.md (which re-indexes what it writes), the manager; nothing else.
"""
