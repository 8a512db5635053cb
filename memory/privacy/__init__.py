"""Privacy: forget, erase, export and import, all built on one owner of "what a scope holds" (holdings).

Also the export zip's format and the checks that refuse an untrusted archive.
May import the manager, ``files/``, ``conversations/`` and the index's progress type.
"""
