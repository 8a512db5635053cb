"""The shared knowledge base: Markdown pages with names, titles and links, kept in the knowledge scope.

Pages are plain files; the manager indexes them like any other memory file.
May import ``files/`` and the manager; nothing else in the package.
"""
