"""``membridge knowledge …``: the shared knowledge base's pages and their links."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .common import CommandError, print_json

if TYPE_CHECKING:
    from ..wiring.app import Services


def cmd_knowledge_list(services: Services, args: argparse.Namespace) -> int:
    pages = services.knowledge.list_pages(args.category)
    if args.json:
        print_json([page.__dict__ for page in pages])
    elif not pages:
        print("the knowledge base is empty")
    for page in pages if not args.json else []:
        print(f"{page.category}/{page.slug}  {page.title}")
    return 0


def cmd_knowledge_show(services: Services, args: argparse.Namespace) -> int:
    content = services.knowledge.read(args.page)
    if args.json:
        print_json({"page": args.page, "content": content})
    else:
        print(content, end="" if content.endswith("\n") else "\n")
    return 0


def cmd_knowledge_add(services: Services, args: argparse.Namespace) -> int:
    if args.file:
        source = Path(args.file)
        if not source.is_file():
            raise CommandError(f"{args.file} is not a file")
        content = source.read_text(encoding="utf-8")
    elif args.text:
        content = " ".join(args.text)
    else:
        content = sys.stdin.read()
    from ..wiring.app import local_user

    page = services.knowledge.write(args.page, content, actor=f"cli:{local_user()}")
    if args.json:
        print_json(page.__dict__)
    else:
        print(f"saved {page.path}")
    return 0


def cmd_knowledge_rm(services: Services, args: argparse.Namespace) -> int:
    from ..wiring.app import local_user

    services.knowledge.delete(args.page, actor=f"cli:{local_user()}")
    if args.json:
        print_json({"deleted": args.page})
    else:
        print(f"deleted {args.page}")
    return 0


def cmd_knowledge_graph(services: Services, args: argparse.Namespace) -> int:
    graph = services.knowledge.build_graph()
    if args.json:
        print_json(graph.to_dict())
    else:
        print(f"{len(graph.nodes)} pages, {len(graph.edges)} links")
        for edge in graph.edges:
            print(f"  {edge['source']} — {edge['target']}")
    return 0
