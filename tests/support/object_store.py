"""A real S3-compatible server on 127.0.0.1 (moto's, in a thread) for the vectors-on-object-storage tests.

LanceDB talks to it over HTTP with its own object-store client, exactly as it would to S3 or MinIO;
boto3 reads the bucket back, so a test can look at every byte stored.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

ACCESS_KEY, SECRET_KEY, REGION = "membridge-test", "membridge-secret", "us-east-1"


@dataclass(frozen=True)
class Bucket:
    """One fresh bucket on the server, and the settings that point LanceDB at it."""

    endpoint: str
    name: str
    client: Any  # a boto3 S3 client

    def uri(self, prefix: str) -> str:
        return f"s3://{self.name}/{prefix}"

    def storage_options(self) -> dict[str, str]:
        """LanceDB's ``storage_options`` for this server (plain HTTP, fixed credentials)."""
        return {"aws_endpoint": self.endpoint, "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SECRET_KEY, "aws_region": REGION, "allow_http": "true"}

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix``: key -> bytes."""
        found: dict[str, bytes] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix):
            for item in page.get("Contents", []):
                found[item["Key"]] = self.client.get_object(Bucket=self.name, Key=item["Key"])["Body"].read()
        return found

    def occurrences(self, needle: str, prefix: str = "") -> dict[str, int]:
        """Objects holding ``needle`` (as UTF-8 bytes), with their counts."""
        data = needle.encode("utf-8")
        return {key: body.count(data) for key, body in self.objects(prefix).items() if data in body}


@contextmanager
def s3_bucket() -> Iterator[Bucket]:
    """An S3 server on a free port of 127.0.0.1 with one empty bucket; stopped afterwards."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY, region_name=REGION)
        name = f"vectors-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=name)
        yield Bucket(endpoint, name, client)
    finally:
        server.stop()
